import AppStoreServer
import Foundation
import MockAppStore
import PostgresNIO
import Reconciler
import ReconcilerDomain
import TestSupport
import Testing

@testable import ReconcilerStore

/// Migrations against a real PostgreSQL: applied once, refused when changed, atomic, and what each
/// data migration does.
@Suite struct MigrationTests {
    @Test func migrateAppliesEachOnceEvenWhenRunConcurrently() async throws {
        try await TestDatabase.with(migrate: false) { db in
            let applied = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<4 { group.addTask { try await Migrator().migrate(db.client, logger: TestDatabase.logger).count } }
                return try await group.reduce(0, +)
            }
            let expected = Migration.embedded.count
            #expect(applied == expected)
            #expect(try await db.count("SELECT count(*) FROM schema_migrations") == expected)
            #expect(try await Migrator().migrate(db.client, logger: TestDatabase.logger).isEmpty)
            try await Migrator().requireCurrent(db.client, logger: TestDatabase.logger)
        }
    }

    @Test func aChangedAppliedMigrationIsRefused() async throws {
        try await TestDatabase.with(migrate: false) { db in
            let original = Migration(fileName: "0001_first.sql", sql: "CREATE TABLE first (id int);")
            try await Migrator(migrations: [original]).migrate(db.client, logger: TestDatabase.logger)
            let edited = Migration(fileName: "0001_first.sql", sql: "CREATE TABLE first (id bigint);")
            let error = await #expect(throws: ReconcilerError.self) {
                try await Migrator(migrations: [edited, Migration(fileName: "0002_second.sql", sql: "CREATE TABLE second (id int);")])
                    .migrate(db.client, logger: TestDatabase.logger)
            }
            #expect(error?.description.contains("changed after it was applied") == true)
            #expect(try await db.count("SELECT count(*) FROM pg_tables WHERE tablename = 'second'") == 0)
            // A database that is ahead of this binary is refused too.
            await #expect(throws: ReconcilerError.self) {
                try await Migrator(migrations: []).migrate(db.client, logger: TestDatabase.logger)
            }
        }
    }

    @Test func aFailingMigrationLeavesNothingBehind() async throws {
        try await TestDatabase.with(migrate: false) { db in
            let broken = Migration(fileName: "0001_broken.sql", sql: "CREATE TABLE half (id int);\nCREATE TABLE oops (id nosuchtype);")
            await #expect(throws: ReconcilerError.self) {
                try await Migrator(migrations: [broken]).migrate(db.client, logger: TestDatabase.logger)
            }
            let halfTables = try await db.count("SELECT count(*) FROM pg_tables WHERE tablename = 'half'")
            let recorded = try await db.count("SELECT count(*) FROM schema_migrations")
            #expect(halfTables == 0)
            #expect(recorded == 0)
            await #expect(throws: ReconcilerError.self) {
                try await Migrator(migrations: [broken]).requireCurrent(db.client, logger: TestDatabase.logger)
            }
        }
    }

    /// Migration 0009 turns the URLs a queue row or a run's options held into a target id and a
    /// redacted form, the same as the code makes them, so no URL secret stays at rest and the
    /// rows still match a forwarder configured with the same URL.
    @Test func migration0009KeepsTargetsAndNoURLSecrets() async throws {
        let urls = [
            "https://hooks:pw-secret@app.example.com:8443/apple/notifications?token=tok-secret#frag",
            "http://127.0.0.1:9000/notifications", "https://user@app.example.com/a@b?x=y", "http://[::1]:8080/hook?k=v",
            "https://app.example.com/hook#tok-secret",
        ]
        try await TestDatabase.with(migrate: false) { db in
            try await Migrator(migrations: Migration.embedded.filter { $0.version < 9 }).migrate(db.client, logger: TestDatabase.logger)
            for (index, url) in urls.enumerated() {
                let options = #"{"forwardTo": "\#(url)"}"#
                try await db.execute(
                    """
                    INSERT INTO reconcile_runs (kind, environment, bundle_id, window_start_ms, window_end_ms, status, phase, dry_run, options)
                    VALUES ('manual', 'Production', 'com.example', 0, 1, 'succeeded', 'done', false, \(options)::jsonb)
                    """)
                try await db.execute(
                    """
                    INSERT INTO forward_queue (notification_uuid, target_url, status, delivered_at)
                    VALUES (\("n-\(index)"), \(url), \(index == 0 ? "delivered" : "pending"), \(index == 0 ? Date() : nil))
                    """)
            }
            // The queue rows above name no stored notification: they take the one app the database served.
            try await Migrator(defaultBundleId: "com.example.app").migrate(db.client, logger: TestDatabase.logger)
            let targets = urls.map(ForwardingTarget.init(url:))
            let rows = try await db.strings("SELECT target_id || ' ' || target_redacted FROM forward_queue ORDER BY notification_uuid")
            #expect(rows == targets.map { "\($0.id) \($0.redacted)" })
            #expect(targets[0].redacted == "https://…@app.example.com:8443/apple/notifications?…")
            #expect(targets[2].redacted == "https://…@app.example.com/a@b?…")
            let options = try await db.strings("SELECT options::text FROM reconcile_runs ORDER BY run_id")
            let decoded = try options.map { try JSONDecoder().decode(RunOptions.self, from: Data($0.utf8)).forwardTo }
            #expect(decoded == targets)
            let everything = try await db.strings(
                "SELECT options::text FROM reconcile_runs UNION ALL SELECT row_to_json(q)::text FROM forward_queue q")
            #expect(everything.allSatisfy { !$0.contains("secret") }, "\(everything)")
            #expect(try await db.count("SELECT delivered FROM forward_queue_totals") == 1)
        }
    }

    /// Migration 0018 counts the delivered rows of each app, environment and webhook, and the
    /// triggers go on counting per key: a delivery recorded, or pruned, moves its own row only.
    @Test func migration0018CountsTheDeliveredRowsOfEachAppAndWebhook() async throws {
        let (production, sandbox) = (try TestApp(), try TestApp(environment: .sandbox))
        try await TestDatabase.with(migrate: false) { db in
            try await Migrator(migrations: Migration.embedded.filter { $0.version < 18 }).migrate(db.client, logger: TestDatabase.logger)
            let (one, two) = (ForwardingTarget(url: "https://one.internal/apple"), ForwardingTarget(url: "https://two.internal/apple?k=v"))
            let first = try await production.recordForwarded(3, to: "https://one.internal/apple", in: db, purchasePrefix: "p1")
            let second = try await production.recordForwarded(2, to: "https://two.internal/apple?k=v", in: db, purchasePrefix: "p2")
            let third = try await sandbox.recordForwarded(2, to: "https://one.internal/apple", in: db, purchasePrefix: "s1")
            let delivered = Array(first.prefix(2)) + second + Array(third.prefix(1))
            try await db.execute(
                "UPDATE forward_queue SET status = 'delivered', delivered_at = now(), attempts = 1 WHERE notification_uuid = ANY(\(delivered))")
            #expect(try await db.count("SELECT delivered FROM forward_queue_totals") == delivered.count)

            try await Migrator().migrate(db.client, logger: TestDatabase.logger)
            func totals() async throws -> [String] {
                try await db.strings(
                    """
                    SELECT environment || ' ' || target_redacted || ' ' || delivered FROM forward_queue_totals
                    WHERE bundle_id = \(TestApp.bundleId) ORDER BY environment, target_redacted
                    """)
            }
            #expect(
                try await totals() == [
                    "Production \(one.redacted) 2", "Production \(two.redacted) 2", "Sandbox \(one.redacted) 1",
                ])
            // Recorded after the migration: one more delivered, one pruned.
            try await db.execute(
                "UPDATE forward_queue SET status = 'delivered', delivered_at = now(), attempts = 1 WHERE notification_uuid = \(third[1])")
            try await db.execute("DELETE FROM forward_queue WHERE notification_uuid = \(first[0])")
            #expect(
                try await totals() == [
                    "Production \(one.redacted) 1", "Production \(two.redacted) 2", "Sandbox \(one.redacted) 2",
                ])
        }
    }

    /// Migration 0013 brings a one-app database along: every row gets its app from its own
    /// signed data; rows whose signed data names none take the one configured app, and without
    /// one the migration stops, naming what to do, and changes nothing.
    @Test func migration0013FillsEachRowsAppFromItsSignedData() async throws {
        let app = try TestApp()
        let signed = app.start + 86_400_000
        let transaction = app.subscription(original: "7000", period: 0, signedDate: signed)
        let payload = try app.notification(.subscribed, .initialBuy, signedDate: signed, transaction: transaction, status: .active)
        let transactionJWS = try app.authority.signer.sign(transaction)
        func oneAppDatabase(_ db: TestDatabase, orphan: Bool) async throws {
            try await Migrator(migrations: Migration.embedded.filter { $0.version < 13 }).migrate(db.client, logger: TestDatabase.logger)
            try await db.execute(
                """
                INSERT INTO notifications (notification_uuid, notification_type, subtype, signed_date_ms, environment,
                    original_transaction_id, transaction_id, signed_payload, source, outcome)
                VALUES ('n-7000', 'SUBSCRIBED', 'INITIAL_BUY', \(signed), 'Production', '7000', NULL, \(payload), 'webhook', 'applied')
                """)
            try await db.execute(
                """
                INSERT INTO transactions (transaction_id, original_transaction_id, environment, bundle_id, signed_date_ms, signed_transaction_info)
                VALUES ('7000', '7000', 'Production', \(TestApp.bundleId), \(signed), \(transactionJWS))
                """)
            try await db.execute("INSERT INTO purchases (original_transaction_id, environment) VALUES ('7000', 'Production')")
            try await db.execute("INSERT INTO history_revisions (anchor_transaction_id, environment, revision) VALUES ('7000', 'Production', 'r1')")
            try await db.execute(
                """
                INSERT INTO purchase_changes (original_transaction_id, source, after_state)
                VALUES ('7000', 'webhook', '{"originalTransactionId": "7000", "environment": "Production"}')
                """)
            if orphan {
                // A purchase stored with no transaction and no notification: its signed data names no app.
                try await db.execute("INSERT INTO purchases (original_transaction_id, environment) VALUES ('7001', 'Production')")
            }
        }
        try await TestDatabase.with(migrate: false) { db in
            try await oneAppDatabase(db, orphan: false)
            try await Migrator().migrate(db.client, logger: TestDatabase.logger)
            for table in ["notifications", "transactions", "purchases", "history_revisions", "purchase_changes"] {
                #expect(try await db.strings("SELECT DISTINCT bundle_id FROM \(unescaped: table)") == [TestApp.bundleId], "\(table)")
            }
        }
        try await TestDatabase.with(migrate: false) { db in
            try await oneAppDatabase(db, orphan: true)
            let refused = await #expect(throws: ReconcilerError.self) {
                try await Migrator().migrate(db.client, logger: TestDatabase.logger)
            }
            #expect(refused?.description.contains("1 rows of purchases carry no bundle ID") == true, "\(String(describing: refused))")
            #expect(try await db.count("SELECT count(*) FROM schema_migrations WHERE version = 13") == 0)
            try await Migrator(defaultBundleId: "com.example.configured").migrate(db.client, logger: TestDatabase.logger)
            #expect(
                try await db.strings("SELECT bundle_id FROM purchases ORDER BY original_transaction_id") == [
                    TestApp.bundleId, "com.example.configured",
                ])
        }
    }

    /// A database from before migration 0015 (every JWS whole, the nested transaction again in
    /// `transactions`) migrates without rewriting a payload; its values rebuild exactly before and
    /// after `compact-payloads` takes them apart, the transaction a notification carried is then
    /// stored inside it, and everything verifies. A second compaction finds nothing to do.
    @Test func aDatabaseFromThePreviousSchemaMigratesAndItsPayloadsRebuildExactly() async throws {
        let app = try TestApp()
        let signed = app.start + 86_400_000
        try await TestDatabase.with(migrate: false) { db in
            try await Migrator(migrations: Migration.embedded.filter { $0.version < 15 }).migrate(db.client, logger: TestDatabase.logger)
            var notifications: [String: String] = [:]
            var transactions: [String: String] = [:]
            for index in 0..<7 {
                let original = "150\(index)"
                let transaction = app.subscription(original: original, period: 0, signedDate: signed + Int64(index))
                let transactionJWS = try app.authority.signer.sign(transaction)
                let uuid = "n-\(original)"
                // As 0.x wrote them: the notification's own copy of the transaction, and the same JWS again in transactions.
                let payload = try app.authority.signer.sign(
                    ResponseBodyV2DecodedPayload(
                        notificationType: .subscribed, subtype: .initialBuy, notificationUUID: uuid, signedDate: signed + Int64(index),
                        data: NotificationData(
                            appAppleId: TestApp.appAppleId, bundleId: TestApp.bundleId, environment: .production,
                            signedTransactionInfo: transactionJWS,
                            signedRenewalInfo: try app.authority.signer.sign(
                                app.renewal(original: original, autoRenew: .on, signedDate: signed + Int64(index))), status: .active)))
                notifications[uuid] = payload
                try await db.execute(
                    """
                    INSERT INTO notifications (notification_uuid, notification_type, subtype, signed_date_ms, bundle_id, environment,
                        original_transaction_id, transaction_id, signed_payload, source, outcome)
                    VALUES (\(uuid), 'SUBSCRIBED', 'INITIAL_BUY', \(signed + Int64(index)), \(TestApp.bundleId), 'Production', \(original),
                        \(original), \(payload), 'webhook', 'applied')
                    """)
                // The last one's transaction came from a snapshot since (another signature): stored in parts.
                let stored = index == 6 ? try app.authority.signer.sign(transaction) : transactionJWS
                transactions[original] = stored
                try await db.execute(
                    """
                    INSERT INTO transactions (transaction_id, original_transaction_id, environment, bundle_id, signed_date_ms,
                        signed_transaction_info, from_notification)
                    VALUES (\(original), \(original), 'Production', \(TestApp.bundleId), \(signed + Int64(index)), \(stored), \(index != 6))
                    """)
            }
            try await Migrator().migrate(db.client, logger: TestDatabase.logger)
            #expect(try await db.count("SELECT count(*) FROM notifications WHERE payload_form = 'legacy'") == 7)
            #expect(try await db.count("SELECT count(*) FROM transactions WHERE payload_form = 'legacy'") == 7)
            let uuids = notifications.keys.sorted()
            // Before compaction: read back as they are.
            #expect(
                try await db.signedPayloads("SELECT notification_uuid FROM notifications ORDER BY notification_uuid")
                    == uuids.map { notifications[$0]! })

            let compactor = PayloadCompactor(database: db.database, batchSize: 3)
            let totals = try await compactor.compact()
            #expect(totals.notifications == 7 && totals.notificationsWhole == 0, "\(totals)")
            #expect(totals.transactions == 7 && totals.transactionsInNotification == 6 && totals.transactionsWhole == 0, "\(totals)")
            #expect(try await db.count("SELECT count(*) FROM notifications WHERE payload_form = 'parts' AND signed_payload IS NULL") == 7)
            #expect(try await db.count("SELECT count(*) FROM transactions WHERE payload_form = 'in_notification'") == 6)
            #expect(try await db.count("SELECT count(*) FROM transactions WHERE payload_form = 'parts' AND transaction_id = '1506'") == 1)
            #expect(try await db.count("SELECT count(*) FROM jws_headers") == 1)
            // After: the same bytes.
            #expect(
                try await db.signedPayloads("SELECT notification_uuid FROM notifications ORDER BY notification_uuid")
                    == uuids.map { notifications[$0]! })
            let rebuilt = try await db.database.transaction { transaction in
                try await PurchaseStore(logger: TestDatabase.logger).storedTransactions(
                    after: .first, updatedSince: nil, limit: 100, headers: HeaderBook(), on: transaction)
            }
            #expect(Dictionary(uniqueKeysWithValues: rebuilt.map { ($0.key.transactionId, $0.value.jws ?? "") }) == transactions)
            let report = try await StoredPayloadVerifier(
                database: db.database, verifiers: [try SignedDataVerifier(configuration: app.verifierConfiguration)]
            ).verify(since: nil)
            #expect(report.failures.isEmpty && report.notifications.verified == 7 && report.transactions.verified == 7, "\(report)")
            // Nothing is left to do, and a second compaction changes nothing.
            #expect(try await compactor.compact() == PayloadCompactor.Totals())
        }
    }
}
