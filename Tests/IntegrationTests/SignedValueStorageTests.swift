import AppStoreServer
import Foundation
import MockAppStore
import PostgresNIO
import ReconcilerDomain
import ReconcilerShared
import TestSupport
import Testing

@testable import Reconciler
@testable import ReconcilerStore

/// Signed values as the database keeps them (each header once, payloads deflated, a transaction
/// inside its notification): real Apple values and the mock's rebuild byte for byte and verify;
/// `verify-stored` finds what was changed in the database and counts pruned payloads apart;
/// `prune` removes what it says and its dry run counts it; old rows compact; a header the process
/// remembers as stored is written again when the database no longer has it.
@Suite struct SignedValueStorageTests {
    let app: TestApp
    init() throws { app = try TestApp() }

    var t0: Int64 { app.start + 86_400_000 }

    static let vectors = Repository.root.appendingPathComponent("Tests/UnitTests/AppStoreServer/Fixtures/apple-signed")
    static func vector(_ file: String) throws -> String {
        try String(contentsOf: vectors.appendingPathComponent(file), encoding: .utf8)
    }

    /// Real Apple notifications and transactions stored by the handler and the store: each rebuilt
    /// from the database is the original byte for byte, verifies again, and one header (one
    /// signing certificate) is stored once for all of them.
    @Test func realAppleValuesAreStoredOnceAndRebuiltExactly() async throws {
        try await TestDatabase.with { db in
            let sandbox = try SignedDataVerifier(configuration: .init(bundleId: "com.loki-project.loki-messenger", environment: .sandbox))
            let files = ["01", "02", "03", "04", "05"].map { "\($0)-notification-sandbox.jws" }
            let notifications = try files.map(Self.vector)
            let handler = NotificationHandler(verifier: sandbox, database: db.database)
            for payload in notifications { _ = try await handler.handle(signedPayload: payload, source: .webhook) }
            // The production consumption request of another app, and transactions of a third (snapshots).
            let production = try Self.vector("09-notification-production.jws")
            let appAppleId = UnverifiedPayload.decode(production, as: ResponseBodyV2DecodedPayload.self)?.data?.appAppleId
            let keysns = try SignedDataVerifier(configuration: .init(bundleId: "com.jrjj.keysns", appAppleId: appAppleId, environment: .production))
            _ = try await NotificationHandler(verifier: keysns, database: db.database).handle(signedPayload: production, source: .webhook)
            let goodheart = try SignedDataVerifier(configuration: .init(bundleId: "com.goodheartapp", environment: .sandbox))
            let snapshot = try Self.vector("08-transaction-sandbox.jws")
            let verifiedSnapshot = try await goodheart.verifyTransaction(snapshot)
            try await db.database.storeHeaders(of: [try #require(JWSParts(exactly: snapshot))])
            let goodheartStore = PurchaseStore(database: db.database, scope: AppScope(target: goodheart.configuration.target, entitlement: .init()))
            try await db.database.transaction { try await goodheartStore.upsertTransactions([.init(verifiedSnapshot)], on: $0) }
            // 06 is the transaction inside 05, read again as a snapshot: the same value is not stored again.
            let inside = try Self.vector("06-transaction-sandbox.jws")
            let sandboxStore = PurchaseStore(database: db.database, scope: AppScope(target: sandbox.configuration.target, entitlement: .init()))
            let verifiedInside = try await sandbox.verifyTransaction(inside)
            try await db.database.transaction { try await sandboxStore.upsertTransactions([.init(verifiedInside)], on: $0) }

            let stored = try await db.signedPayloads("SELECT notification_uuid FROM notifications ORDER BY signed_date_ms")
            #expect(Set(stored) == Set(notifications + [production]))
            #expect(try await db.count("SELECT count(*) FROM notifications WHERE payload_form = 'parts' AND signed_payload IS NULL") == 6)
            // Every value of the 2023 and 2025 leaves: one header per signing certificate, whatever the number of values.
            #expect(try await db.count("SELECT count(*) FROM jws_headers") == 3)
            #expect(try await db.count("SELECT count(*) FROM notifications WHERE transaction_header_sha256 IS NOT NULL") == 0)
            let forms = try await db.strings("SELECT transaction_id || ' ' || payload_form FROM transactions ORDER BY transaction_id")
            #expect(forms.count == 6, "\(forms)")
            #expect(forms.filter { $0.hasSuffix(" in_notification") }.count == 5, "\(forms)")
            #expect(forms.filter { $0.hasSuffix(" parts") }.count == 1, "\(forms)")

            // verify-stored rebuilds everything and finds it genuine.
            let report = try await StoredPayloadVerifier(database: db.database, verifiers: [sandbox, keysns, goodheart]).verify(since: nil)
            #expect(report.failures.isEmpty, "\(report.failures)")
            #expect(report.notifications.verified == 6 && report.transactions.verified == 6, "\(report)")
            #expect(report.transactions.insideNotification == 5)
            #expect(report.notifications.signedBytes == (notifications + [production]).map(\.utf8.count).reduce(0, +))
            let rebuiltTransactions = try await db.database.transaction { transaction in
                try await PurchaseStore(logger: TestDatabase.logger).storedTransactions(
                    after: .first, updatedSince: nil, limit: 100, headers: HeaderBook(), on: transaction)
            }
            #expect(rebuiltTransactions.contains { $0.value.jws == inside })
            #expect(rebuiltTransactions.contains { $0.value.jws == snapshot })
        }
    }

    /// Records a live notification of purchase `original` (transaction and renewal info inside); returns its payload.
    func recordLive(_ original: String, signedDate: Int64, forwarding: String? = nil, in db: TestDatabase) async throws -> String {
        let payload = try app.notification(
            .didRenew, signedDate: signedDate, transaction: app.subscription(original: original, period: 1, signedDate: signedDate),
            renewal: app.renewal(original: original, autoRenew: .on, signedDate: signedDate), status: .active)
        _ = try await app.handler(db).handle(
            signedPayload: payload, source: .webhook, forwarding: forwarding.map { .init(target: ForwardingTarget(url: $0)) })
        return payload
    }

    /// A transaction read from a snapshot (Get Transaction History), stored in parts.
    func recordSnapshot(_ original: String, signedDate: Int64, in db: TestDatabase) async throws -> String {
        let signed = try app.authority.signer.sign(app.subscription(original: original, period: 0, signedDate: signedDate))
        let verified = try await SignedDataVerifier(configuration: app.verifierConfiguration).verifyTransaction(signed)
        try await db.database.storeHeaders(of: [try #require(JWSParts(exactly: signed))])
        let store = PurchaseStore(database: db.database, scope: AppScope(target: app.verifierConfiguration.target, entitlement: .init()))
        try await db.database.transaction { try await store.upsertTransactions([.init(verified)], on: $0) }
        return signed
    }

    @Test func verifyStoredFindsWhatWasChangedInTheDatabaseAndCountsPrunedPayloadsApart() async throws {
        try await TestDatabase.with { db in
            for index in 0..<6 { _ = try await recordLive("70\(index)", signedDate: t0 + Int64(index), in: db) }
            for index in 0..<2 { _ = try await recordSnapshot("71\(index)", signedDate: t0 + Int64(index), in: db) }
            let uuids = try await db.strings("SELECT notification_uuid FROM notifications ORDER BY original_transaction_id")
            let verifier = try SignedDataVerifier(configuration: app.verifierConfiguration)
            let clean = try await StoredPayloadVerifier(database: db.database, verifiers: [verifier], batchSize: 4).verify(since: nil)
            #expect(clean.failures.isEmpty && clean.notifications.verified == 6 && clean.transactions.verified == 8, "\(clean)")

            // One bit of a notification's signature, one byte of another's deflated payload, the
            // signature of a third's nested transaction, a snapshot's signature; a fifth pruned.
            try await db.execute(
                "UPDATE notifications SET signature = set_byte(signature, 7, get_byte(signature, 7) # 1) WHERE notification_uuid = \(uuids[0])")
            try await db.execute(
                "UPDATE notifications SET payload = set_byte(payload, 20, get_byte(payload, 20) # 4) WHERE notification_uuid = \(uuids[1])")
            try await db.execute(
                """
                UPDATE notifications SET transaction_signature = set_byte(transaction_signature, 0, get_byte(transaction_signature, 0) # 128)
                WHERE notification_uuid = \(uuids[2])
                """)
            try await db.execute(
                "UPDATE transactions SET signature = set_byte(signature, 63, get_byte(signature, 63) # 1) WHERE original_transaction_id = '711'")
            try await db.execute(
                """
                UPDATE notifications SET payload_form = 'pruned', payload = NULL, signature = NULL, transaction_offset = NULL,
                    transaction_signature = NULL, renewal_offset = NULL, renewal_signature = NULL
                WHERE notification_uuid = \(uuids[3])
                """)
            let report = try await StoredPayloadVerifier(database: db.database, verifiers: [verifier], batchSize: 4).verify(since: nil)
            let failed = Set(report.failures.map(\.id))
            // A transaction stored inside a notification is rebuilt from it: the one whose signature
            // changed fails, and the one inside the changed payload fails too unless the change fell
            // outside it; the one inside the pruned notification is pruned with it.
            let expected = Set(uuids[0...2]).union(["711", "702-1"])
            #expect(failed.isSuperset(of: expected) && failed.subtracting(expected).isSubset(of: ["701-1"]), "\(report.failures)")
            #expect(report.notifications.failed == 3 && report.notifications.pruned == 1 && report.notifications.verified == 2, "\(report)")
            #expect(report.transactions.pruned == 1 && report.transactions.failed + report.transactions.verified == 7, "\(report)")
            #expect((2...3).contains(report.transactions.failed), "\(report)")
            let reasons = Dictionary(report.failures.map { ($0.id, $0.reason) }, uniquingKeysWith: { first, _ in first })
            #expect(reasons[uuids[0]] == VerificationError.Reason.invalidSignature.rawValue)
            #expect(reasons["711"] == VerificationError.Reason.invalidSignature.rawValue)
            // Only what was stored after a time.
            let none = try await StoredPayloadVerifier(database: db.database, verifiers: [verifier]).verify(since: Date().addingTimeInterval(3600))
            #expect(none.notifications.verified + none.notifications.failed + none.transactions.verified == 0)
        }
    }

    /// A delivery leased from the queue carries Apple's exact body, rebuilt from what is stored.
    @Test func aForwardedNotificationIsTheSignedPayloadByteForByte() async throws {
        try await TestDatabase.with { db in
            let payload = try await recordLive("720", signedDate: t0, forwarding: "https://app.example.com/hook", in: db)
            let queue = ForwardQueue(database: db.database)
            let delivery = try await queue.lease(
                target: ForwardingTarget(url: "https://app.example.com/hook"), worker: "test", token: UUID(), leaseDuration: .seconds(30))
            #expect(delivery?.signedPayload == payload)
        }
    }

    /// A process remembers the headers it saw stored and does not send them again, but the database
    /// can lose one it remembers (restored from a backup taken before the header was stored, or a
    /// failover to a replica that had not received it). The next notification and snapshot signed
    /// with it store it again, in their own transaction: they rebuild, are forwarded byte for byte,
    /// and so do the values stored before that named it.
    @Test func aHeaderTheDatabaseLostIsStoredAgainByTheNextValueSignedWithIt() async throws {
        try await TestDatabase.with { db in
            let earlier = try await recordLive("740", signedDate: t0, in: db)
            _ = try await recordSnapshot("741", signedDate: t0, in: db)
            #expect(try await db.count("SELECT count(*) FROM jws_headers") == 1)
            try await db.execute("DELETE FROM jws_headers")

            let url = "https://app.example.com/hook"
            let payload = try await recordLive("742", signedDate: t0 + 1, forwarding: url, in: db)
            #expect(try await db.count("SELECT count(*) FROM jws_headers") == 1, "the notification stored its header again")
            #expect(try await db.signedPayloads("SELECT notification_uuid FROM notifications ORDER BY signed_date_ms") == [earlier, payload])
            let delivery = try await ForwardQueue(database: db.database).lease(
                target: ForwardingTarget(url: url), worker: "test", token: UUID(), leaseDuration: .seconds(30))
            #expect(delivery?.signedPayload == payload)

            // The same for a snapshot alone (its own statement).
            try await db.execute("DELETE FROM jws_headers")
            let snapshot = try await recordSnapshot("743", signedDate: t0 + 1, in: db)
            #expect(try await db.count("SELECT count(*) FROM jws_headers") == 1, "the snapshot stored its header again")
            let rebuilt = try await db.database.transaction { transaction in
                try await PurchaseStore(logger: TestDatabase.logger).storedTransactions(
                    after: .first, updatedSince: nil, limit: 100, headers: HeaderBook(), on: transaction)
            }
            #expect(rebuilt.contains { $0.key.transactionId == "743" && $0.value.jws == snapshot }, "\(rebuilt)")
            let report = try await StoredPayloadVerifier(
                database: db.database, verifiers: [try SignedDataVerifier(configuration: app.verifierConfiguration)]
            ).verify(since: nil)
            #expect(report.failures.isEmpty && report.notifications.verified == 2 && report.transactions.verified == 4, "\(report)")
        }
    }
}
