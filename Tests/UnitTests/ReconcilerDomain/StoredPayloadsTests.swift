import AppStoreServer
import Foundation
import MockAppStore
import ReconcilerDomain
import Testing

/// The payload bytes the store keeps: deflated with the preset dictionary, given back exactly,
/// and refused when they would not be (a NUL in a payload, stored bytes changed).
@Suite struct StoredPayloadsTests {
    static func notification() throws -> String {
        let signer = try SigningCertificateAuthority().signer
        let transaction = try signer.sign(
            JWSTransactionDecodedPayload(
                originalTransactionId: "2000001024993299", transactionId: "2000001024998954", bundleId: "com.example.app",
                productId: "com.example.monthly", purchaseDate: 1_759_302_552_000, quantity: 1, type: .autoRenewableSubscription,
                inAppOwnershipType: .purchased, signedDate: 1_759_302_518_835, environment: .sandbox, storefront: "USA",
                storefrontId: "143441", transactionReason: .renewal, currency: "USD", price: 4990))
        let renewal = try signer.sign(
            JWSRenewalInfoDecodedPayload(
                originalTransactionId: "2000001024993299", autoRenewProductId: "com.example.monthly", productId: "com.example.monthly",
                autoRenewStatus: .on, signedDate: 1_759_302_518_835, environment: .sandbox))
        return try signer.sign(
            ResponseBodyV2DecodedPayload(
                notificationType: .didRenew, notificationUUID: UUID().uuidString.lowercased(), version: "2.0", signedDate: 1_759_302_518_835,
                data: NotificationData(
                    bundleId: "com.example.app", environment: .sandbox, signedTransactionInfo: transaction, signedRenewalInfo: renewal,
                    status: .active)))
    }

    @Test func aNotificationsPayloadsComeBackExactlyAndSmall() throws {
        let payload = try Self.notification()
        let storage = try #require(NotificationStorage(payload, nested: NotificationStorage.nestedValues(of: payload)))
        let stored = storage.payloads.deflated
        #expect(stored.first == 1)
        let payloads = try #require(StoredPayloads.inflate(stored, count: 3))
        // The nested values' payloads in field order (transaction, then renewal info), whatever their order in the JSON.
        let nested = NotificationPayloadParts.Field.allCases.compactMap { field in storage.parts.nested.first { $0.field == field }?.parts.payload }
        #expect(payloads == [storage.parts.notification.payload] + nested)
        let json = payloads.map(\.count).reduce(0, +)
        // The field names are in the dictionary: well under half of the JSON is kept.
        #expect(stored.count * 3 < json, "\(stored.count) bytes kept of \(json)")
        #expect(stored.count < Deflate.compress(payloads.joined(separator: [0]).map { $0 }).count)
    }

    @Test func storedBytesThatDoNotInflateExactlyAreRefused() throws {
        let payload = try Self.notification()
        let stored = try #require(NotificationStorage(payload, nested: NotificationStorage.nestedValues(of: payload))).payloads.deflated
        #expect(StoredPayloads.inflate(stored, count: 2) == nil, "the wrong number of payloads")
        #expect(StoredPayloads.inflate([2] + stored.dropFirst(), count: 3) == nil, "an unknown format")
        #expect(StoredPayloads.inflate(Array(stored.prefix(stored.count / 2)), count: 3) == nil, "cut short")
        #expect(StoredPayloads.inflate(stored + [0x55], count: 3) == nil, "bytes after the end")
        // A payload holding a NUL byte (never in JSON) is not stored this way: it is stored whole.
        #expect(StoredPayloads(Array("{\"a\":1}".utf8) + [0]) == nil)
        #expect(StoredPayloads(Array("{\"a\":1}".utf8)).flatMap { StoredPayloads.inflate($0.deflated, count: 1) } == [Array("{\"a\":1}".utf8)])
        #expect(Deflate.decompress(Array(repeating: 0xFF, count: 40), limit: 1 << 20) == nil)
    }
}
