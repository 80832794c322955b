import AppStoreServer
import Foundation
import Testing

@testable import MockAppStore

/// Signed values taken apart for storage (each header once, the payload's bytes, the signature)
/// rebuild byte for byte, and the rebuilt value verifies: every real Apple vector and every kind
/// of value the mock signs.
@Suite struct JWSPartsTests {
    /// What a notification's payload names as nested signed values, read without verifying.
    static func nested(of jws: String) -> [NotificationPayloadParts.Field: String] {
        let data = UnverifiedPayload.decode(jws, as: ResponseBodyV2DecodedPayload.self)?.data
        var nested: [NotificationPayloadParts.Field: String] = [:]
        nested[.signedTransactionInfo] = data?.signedTransactionInfo
        nested[.signedRenewalInfo] = data?.signedRenewalInfo
        return nested
    }

    @Test func everyRealAppleVectorRebuildsExactlyAndTheRebuiltValueVerifies() async throws {
        let entries = try AppleSignedVectorsTests.entries()
        #expect(entries.count == 16)
        var nestedCut = 0
        for entry in entries {
            let token = try AppleSignedVectorsTests.token(entry.file)
            let parts = try #require(JWSParts(exactly: token), "\(entry.file)")
            #expect(parts.compact == token, "\(entry.file)")
            #expect(parts.signature.count == 64, "\(entry.file)")
            // The payload is stored as the bytes Apple signed, not re-serialised.
            #expect(try JSONSerialization.jsonObject(with: Data(parts.payload)) is [String: Any], "\(entry.file)")
            var rebuilt = parts.compact
            if entry.kind == "notification" {
                let nested = Self.nested(of: token)
                let notification = try #require(NotificationPayloadParts(token, nested: nested), "\(entry.file)")
                #expect(notification.compact == token, "\(entry.file)")
                #expect(notification.nested.count == nested.count, "\(entry.file)")
                for value in notification.nested {
                    #expect(value.parts.compact == nested[value.field], "\(entry.file) \(value.field)")
                    // One certificate signed all three: one header to store.
                    #expect(value.parts.headerSHA256 == notification.notification.headerSHA256, "\(entry.file)")
                    nestedCut += 1
                }
                // What is stored of the notification itself stays JSON, its nested values emptied.
                let cut = try #require(try JSONSerialization.jsonObject(with: Data(notification.notification.payload)) as? [String: Any])
                let data = cut["data"] as? [String: Any]
                for field in nested.keys { #expect(data?[field.rawValue] as? String == "", "\(entry.file)") }
                rebuilt = notification.compact
            }
            guard entry.expected == "valid" else { continue }
            let environment = AppStoreEnvironment(rawValue: entry.environment)
            let verifier = try SignedDataVerifier(
                configuration: .init(
                    bundleId: entry.bundleId ?? "renewal-info-has-no-bundle-id",
                    appAppleId: environment == .production ? AppleSignedVectorsTests.appAppleId(of: token) ?? 0 : nil, environment: environment))
            switch entry.kind {
            case "notification": _ = try await verifier.verifyNotification(rebuilt)
            case "transaction": _ = try await verifier.verifyTransaction(rebuilt)
            default: _ = try await verifier.verifyRenewalInfo(rebuilt)
            }
        }
        // 02-05 and 16 carry a transaction and renewal info, 09 a transaction.
        #expect(nestedCut == 11)
    }

    @Test(arguments: [AppStoreEnvironment.production, .sandbox])
    func everyValueTheMockSignsRebuildsExactlyAndTheRebuiltValueVerifies(_ environment: AppStoreEnvironment) async throws {
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let scenario = ScenarioConfiguration(
            seed: 22, customers: 25, now: now, span: 20 * 86_400_000, outageStart: now - 3 * 86_400_000, outageEnd: now - 86_400_000,
            environment: environment)
        try await MockAppStore.withRunning(.init(scenario: scenario, appleSizedCertificates: true)) { mock, baseURL in
            let client = mock.client(baseURL: baseURL, requestsPerSecond: 10_000)
            let verifier = try mock.verifier()
            var kinds = Set<String>()
            var originals = Set<String>()
            var counts = (notifications: 0, transactions: 0, renewals: 0, appTransactions: 0)
            for try await page in client.notificationHistory(.init(startDate: scenario.start - 60_000, endDate: now + 60_000)) {
                for item in page.items {
                    let token = try #require(item.signedPayload)
                    let parts = try #require(NotificationPayloadParts(token, nested: Self.nested(of: token)))
                    #expect(parts.compact == token)
                    // The chain is as large as Apple's: the header alone is about 4.4 KB.
                    #expect((4_300...4_500).contains(parts.notification.encodedHeader.utf8.count))
                    let notification = try await verifier.verifyNotification(parts.compact).payload
                    kinds.insert(notification.notificationType?.rawValue ?? "")
                    counts.notifications += 1
                    for value in parts.nested {
                        switch value.field {
                        case .signedTransactionInfo:
                            let transaction = try await verifier.verifyTransaction(value.parts.compact).payload
                            originals.insert(transaction.originalTransactionId ?? "")
                            counts.transactions += 1
                        case .signedRenewalInfo:
                            _ = try await verifier.verifyRenewalInfo(value.parts.compact)
                            counts.renewals += 1
                        }
                    }
                    if let appTransaction = notification.appData?.signedAppTransactionInfo {
                        let rebuilt = try #require(JWSParts(exactly: appTransaction)).compact
                        #expect(rebuilt == appTransaction)
                        _ = try await verifier.verifyAndDecodeAppTransaction(rebuilt)
                        counts.appTransactions += 1
                    }
                }
            }
            // Snapshots: every customer's transaction history and subscription statuses.
            for original in originals.sorted() {
                for try await page in client.transactionHistory(anyTransactionId: original, .init()) {
                    for signed in page.signedTransactions ?? [] {
                        let rebuilt = try #require(JWSParts(exactly: signed)).compact
                        #expect(rebuilt == signed)
                        _ = try await verifier.verifyTransaction(rebuilt)
                        counts.transactions += 1
                    }
                }
                let statuses = try await client.getAllSubscriptionStatuses(anyTransactionId: original)
                for item in (statuses.data ?? []).flatMap({ $0.lastTransactions ?? [] }) {
                    for signed in [item.signedTransactionInfo, item.signedRenewalInfo].compactMap({ $0 }) {
                        let rebuilt = try #require(JWSParts(exactly: signed)).compact
                        #expect(rebuilt == signed)
                        _ = try await verifier.inspect(rebuilt, checkingApp: true)
                        counts.renewals += 1
                    }
                }
            }
            #expect(counts.notifications > 100 && counts.transactions > 100 && counts.renewals > 50, "\(counts)")
            #expect(kinds.isSuperset(of: ["SUBSCRIBED", "DID_RENEW", "EXPIRED", "RESCIND_CONSENT"]), "\(kinds)")
            #expect(counts.appTransactions > 0)
        }
    }

    /// A value whose parts would not give it back byte for byte is not taken apart (the store keeps it whole).
    @Test func aValueThatWouldNotRebuildExactlyIsNotTakenApart() throws {
        let authority = try SigningCertificateAuthority()
        let token = try authority.signer.sign(JWSTransactionDecodedPayload(originalTransactionId: "1", transactionId: "1", signedDate: 1))
        #expect(JWSParts(exactly: token)?.compact == token)
        let segments = token.split(separator: ".").map(String.init)
        for altered in [
            "\(segments[0]).\(segments[1])=.\(segments[2])",  // padding
            "\(segments[0]).\(segments[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")).\(segments[2])x",
            "\(segments[0]).\(segments[1])",  // two segments
            "\(segments[0]).\(segments[1]).\(segments[2]).x",  // four
            "\(segments[0]).\(segments[1]).\(segments[2]).",  // a dot at the end
            ".\(segments[1]).\(segments[2])",  // no header
        ] where altered != token {
            #expect(JWSParts(exactly: altered) == nil, "\(altered.prefix(40))")
            #expect(NotificationPayloadParts(altered, nested: [:]) == nil)
        }
        // Stray bits in the last character decode to the same bytes: re-encoding would change them.
        let last = segments[2].last!
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        let index = alphabet.firstIndex(of: last)!
        // 64-byte signatures leave 4 unused bits in the last of their 86 characters.
        let stray = "\(segments[0]).\(segments[1]).\(segments[2].dropLast())\(alphabet[index ^ 1])"
        #expect(JWSParts(exactly: stray) == nil)
    }

    /// A nested value the payload does not hold verbatim stays in the payload: still exact.
    @Test func aNestedValueNotFoundVerbatimStaysInThePayload() throws {
        let authority = try SigningCertificateAuthority()
        let transaction = try authority.signer.sign(JWSTransactionDecodedPayload(originalTransactionId: "1", transactionId: "1", signedDate: 1))
        let notification = try authority.signer.sign(
            ResponseBodyV2DecodedPayload(
                notificationType: .didRenew, notificationUUID: "u", signedDate: 2,
                data: NotificationData(bundleId: "b", environment: .sandbox, signedTransactionInfo: transaction)))
        let cut = try #require(NotificationPayloadParts(notification, nested: [.signedTransactionInfo: transaction]))
        #expect(cut.nested.count == 1 && cut.compact == notification)
        #expect(cut.notification.payload.count < JWSParts(exactly: notification)!.payload.count - transaction.utf8.count + 1)
        let other = try authority.signer.sign(JWSTransactionDecodedPayload(originalTransactionId: "2", transactionId: "2", signedDate: 1))
        let kept = try #require(NotificationPayloadParts(notification, nested: [.signedTransactionInfo: other]))
        #expect(kept.nested.isEmpty && kept.compact == notification)
    }
}
