import AppStoreServer
import Crypto
import Foundation
import Testing

/// Real Apple-signed values (see Fixtures/apple-signed/README.md): the valid ones must verify
/// against the bundled Apple Root CA - G3, the invalid ones must fail for their stated reason.
@Suite struct AppleSignedVectorsTests {
    struct Entry: Decodable {
        var file: String
        var kind: String
        var bundleId: String?
        var environment: String
        var signedDate: Int64?
        var expected: String
    }

    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Fixtures/apple-signed")

    static func entries() throws -> [Entry] {
        try JSONDecoder().decode([Entry].self, from: Data(contentsOf: directory.appendingPathComponent("manifest.json")))
    }

    static func token(_ file: String) throws -> String {
        try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)
    }

    /// The app id a production notification names, read without verification to configure the verifier.
    static func appAppleId(of token: String) -> Int64? {
        UnverifiedPayload.decode(token, as: ResponseBodyV2DecodedPayload.self)?.data?.appAppleId
    }

    @Test func bundledRootIsAppleRootCAG3() {
        let fingerprint = SHA256.hash(data: TrustedRoots.appleRootCAG3DER).map { String(format: "%02X", $0) }.joined(separator: ":")
        #expect(fingerprint == "63:34:3A:BF:B8:9A:6A:03:EB:B5:7E:9B:3F:5F:A7:BE:7C:4F:5C:75:6F:30:17:B3:A8:C4:88:C3:65:3E:91:79")
        let fromFile = try? TrustedRoots.load(paths: [Self.directory.appendingPathComponent("real-chain/AppleRootCA-G3.pem").path])
        #expect(fromFile == [TrustedRoots.appleRootCAG3])
    }

    @Test func validVectorsVerify() async throws {
        let valid = try Self.entries().filter { $0.expected == "valid" }
        #expect(valid.count == 12)
        for entry in valid {
            let token = try Self.token(entry.file)
            let environment = AppStoreEnvironment(rawValue: entry.environment)
            let verifier = try SignedDataVerifier(
                configuration: .init(
                    bundleId: entry.bundleId ?? "renewal-info-has-no-bundle-id",
                    appAppleId: environment == .production ? Self.appAppleId(of: token) ?? 0 : nil,
                    environment: environment))
            switch entry.kind {
            case "notification":
                let notification = try await verifier.verifyAndDecodeNotification(token)
                #expect(notification.signedDate == entry.signedDate, "\(entry.file)")
            case "transaction":
                let transaction = try await verifier.verifyAndDecodeTransaction(token)
                #expect(transaction.signedDate == entry.signedDate, "\(entry.file)")
            case "renewal":
                let renewal = try await verifier.verifyAndDecodeRenewalInfo(token)
                #expect(renewal.signedDate == entry.signedDate, "\(entry.file)")
            default:
                Issue.record("unknown kind \(entry.kind)")
            }
        }
    }

    @Test(arguments: [
        ("13-notification-sandbox-invalid-root.jws", VerificationError.Reason.untrustedRoot),
        ("14-notification-sandbox-invalid-alg.jws", .unsupportedAlgorithm),
        ("15-notification-sandbox-invalid-chain.jws", .invalidChain),
        ("16-notification-sandbox-invalid-no-signed-date.jws", .missingSignedDate),
    ])
    func invalidVectorsAreRejectedForTheirReason(file: String, reason: VerificationError.Reason) async throws {
        let entry = try #require(try Self.entries().first { $0.file == file })
        #expect(entry.expected == "invalid")
        let verifier = try SignedDataVerifier(
            configuration: .init(
                bundleId: entry.bundleId ?? "", environment: AppStoreEnvironment(rawValue: entry.environment)))
        let error = await #expect(throws: VerificationError.self) {
            _ = try await verifier.verifyAndDecodeNotification(try Self.token(file))
        }
        #expect(error?.reason == reason, "\(file): \(String(describing: error))")
    }

    @Test func aNotificationNestsGenuineSignedValues() async throws {
        // 05 is a REFUND whose signedTransactionInfo is vector 06.
        let verifier = try SignedDataVerifier(configuration: .init(bundleId: "com.loki-project.loki-messenger", environment: .sandbox))
        let notification = try await verifier.verifyAndDecodeNotification(try Self.token("05-notification-sandbox.jws"))
        #expect(notification.notificationType == .refund)
        let nested = try #require(notification.data?.signedTransactionInfo)
        #expect(nested == (try Self.token("06-transaction-sandbox.jws")))
        let transaction = try await verifier.verifyAndDecodeTransaction(nested)
        #expect(transaction.revocationDate != nil)
    }
}
