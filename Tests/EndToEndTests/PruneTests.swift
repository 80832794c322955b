import AppStoreServer
import Foundation
import PostgresNIO
import TestSupport
import Testing

@testable import Reconciler
@testable import ReconcilerStore

/// `reconciler prune` removes delivered forwarding rows and old change-feed rows,
/// its dry run counts exactly what it then removes, and the queue's gauges never scan the table.
@Suite struct PruneTests {
    let app: TestApp
    init() throws { app = try TestApp() }

    /// The number a line `<prefix> N <rest>` of `output` gives, per line prefix and part.
    static func count(_ output: String, _ prefix: String, _ part: String) -> Int? {
        for line in output.split(separator: "\n") where line.hasPrefix(prefix + " ") {
            let words = line.dropFirst(prefix.count + 1).split(separator: " ")
            if words.count > 1, line.dropFirst(prefix.count + 1).dropFirst(words[0].count + 1).hasPrefix(part) { return Int(words[0]) }
        }
        return nil
    }

    /// Records `count` live notifications forwarded to `url`; returns their UUIDs.
    func record(_ count: Int, forwardingTo url: String, in db: TestDatabase) async throws -> [String] {
        try await app.recordForwarded(count, to: url, in: db, purchasePrefix: "prune")
    }

    @Test func pruneRemovesDeliveredForwardsAndOldChangesAndItsDryRunCountsWhatItRemoves() async throws {
        try await TestDatabase.with { db in
            let uuids = try await record(8, forwardingTo: "https://app.example.com/hook", in: db)
            // 0-3 delivered 10 days ago, 4 delivered an hour ago, 5 failed 10 days ago, 6-7 pending.
            try await db.execute(
                """
                UPDATE forward_queue SET status = 'delivered', delivered_at = now() - interval '10 days', attempts = 1
                WHERE notification_uuid = ANY(\(Array(uuids[0...3])))
                """)
            try await db.execute(
                "UPDATE forward_queue SET status = 'delivered', delivered_at = now() - interval '1 hour', attempts = 1 WHERE notification_uuid = \(uuids[4])"
            )
            try await db.execute(
                "UPDATE forward_queue SET status = 'failed', queued_at = now() - interval '10 days', attempts = 12 WHERE notification_uuid = \(uuids[5])"
            )
            // The feed: the first six changes are old, the last two are not. Pruning, like reading,
            // waits for transactions still running anywhere in the cluster (another test's).
            let store = PurchaseStore(logger: TestDatabase.logger)
            try await eventually("the feed readable") {
                try await db.database.transaction { try await store.changes(after: .start, limit: 100, on: $0) }.changes.count == 8
            }
            let ids = try await db.strings("SELECT change_id::text FROM purchase_changes ORDER BY xid, change_id")
            #expect(ids.count == 8)
            try await db.execute(
                "UPDATE purchase_changes SET changed_at = now() - interval '40 days' WHERE change_id::text = ANY(\(Array(ids[0...5])))")

            let before = try await db.stateFingerprint()
            let arguments = ["prune", "--changes-older-than", "30d", "--delivered-older-than", "7d"]
            let dry = try await db.reconciler(arguments + ["--dry-run"])
            #expect(dry.status == 0, "\(dry.stderr)")
            #expect(try await db.count("SELECT count(*) FROM forward_queue") == 8)
            #expect(try await db.count("SELECT count(*) FROM purchase_changes") == 8)
            #expect(try await db.stateFingerprint() == before)

            let real = try await db.reconciler(arguments)
            #expect(real.status == 0, "\(real.stderr)")
            #expect(Self.count(dry.stdout, "would prune", "changes") == 6, "\(dry.stdout)")
            #expect(Self.count(dry.stdout, "would prune", "delivered") == 4, "\(dry.stdout)")
            #expect(Self.count(real.stdout, "pruned", "changes") == Self.count(dry.stdout, "would prune", "changes"), "\(real.stdout)")
            #expect(Self.count(real.stdout, "pruned", "delivered") == Self.count(dry.stdout, "would prune", "delivered"), "\(real.stdout)")
            #expect(
                Set(try await db.strings("SELECT notification_uuid FROM forward_queue")) == Set(uuids[4...]),
                "only delivered rows older than 7 days go")
            #expect(try await db.strings("SELECT change_id::text FROM purchase_changes ORDER BY xid, change_id") == Array(ids[6...]))
            #expect(try await db.stateFingerprint() == before)

            // Nothing left to prune; the alias keeps its own words and exit code.
            let again = try await db.reconciler(arguments)
            #expect(again.status == 0 && Self.count(again.stdout, "pruned", "changes") == 0, "\(again.stdout)")
            let alias = try await db.reconciler(["changes", "--prune-before", "30d"])
            #expect(alias.status == 0 && alias.stdout.hasPrefix("pruned 0 changes"), "\(alias.stdout)")

            // Refused before anything is read or deleted: no part, an age under an hour, a bare number.
            for refused in [["prune"], ["prune", "--dry-run"], ["prune", "--changes-older-than", "30m"], ["prune", "--delivered-older-than", "7"]] {
                let result = try await db.reconciler(refused)
                #expect(result.status == 1, "\(refused): \(result.stderr)")
            }
        }
    }

    /// The gauges every `serve` replica reads each minute, with a million delivered rows: no
    /// sequential scan of forward_queue (what waits and what failed come from partial indexes,
    /// the delivered count from a counter), and the counter holds the right number.
    ///
    /// In a cluster of its own: loading a million rows is one long transaction, which would hold
    /// back the change feed of every other test on the shared cluster (its horizon is cluster-wide).
    @Test func theQueueGaugesScanNoDeliveredRows() async throws {
        try await PrivateCluster.with { cluster in
            try await TestDatabase.with(server: cluster.url) { db in try await checkQueueGaugePlans(db) }
        }
    }

    func checkQueueGaugePlans(_ db: TestDatabase) async throws {
        _ = try await record(3, forwardingTo: "https://app.example.com/hook", in: db)
        let target = ForwardingTarget(url: "https://app.example.com/hook")
        // A million rows as forwarders leave them, delivered; the counter is moved as the UPDATE
        // trigger moves it when a forwarder records a 2xx (MetricsTests checks that trigger).
        try await db.execute(
            """
            INSERT INTO forward_queue (notification_uuid, bundle_id, environment, target_id, target_redacted, status, attempts, queued_at, delivered_at)
            SELECT 'delivered-' || g, \(TestApp.bundleId), 'Production', \(target.id), \(target.redacted), 'delivered', 1, now() - interval '2 days',
                   now() - interval '1 day'
            FROM generate_series(1, 1000000) g
            """)
        try await db.execute(
            """
            INSERT INTO forward_queue_totals (bundle_id, environment, target_id, target_redacted, delivered)
            VALUES (\(TestApp.bundleId), 'Production', \(target.id), \(target.redacted), 1000000)
            """)
        try await db.execute("ANALYZE forward_queue")
        let app = AppTarget(bundleId: TestApp.bundleId, environment: .production)
        for query in [ForwardQueue.queueSummaryQuery(), ForwardQueue.appSummaryQuery(of: app)] {
            let plan = try await db.strings(PostgresQuery(unsafeSQL: "EXPLAIN " + query.sql, binds: query.binds)).joined(separator: "\n")
            #expect(!plan.contains("Seq Scan on forward_queue "), "\(plan)")
        }
        let summary = try await ForwardQueue(database: db.database).summary(runIds: nil)
        #expect(summary.delivered == 1_000_000 && summary.pending == 3 && summary.failed == 0, "\(summary)")
        let ofApp = try await ForwardQueue(database: db.database).summaries(of: app)
        #expect(ofApp.map(\.target) == [target] && ofApp.first?.summary.delivered == 1_000_000 && ofApp.first?.summary.pending == 3)
        // What a forwarder asks while draining, and what pruning counts and removes, read indexes too.
        for query in [
            ForwardQueue.pendingDeliveriesQuery(target: target, runIds: nil),
            PurchaseStore.pruneDeliveredForwardsQuery(before: Date(timeIntervalSinceNow: -7 * 86_400), limit: nil, dryRun: true),
            PurchaseStore.pruneDeliveredForwardsQuery(before: Date(timeIntervalSinceNow: -7 * 86_400), limit: 10_000, dryRun: false),
        ] {
            let plan = try await db.strings(PostgresQuery(unsafeSQL: "EXPLAIN " + query.sql, binds: query.binds)).joined(separator: "\n")
            #expect(!plan.contains("Seq Scan on forward_queue "), "\(plan)")
        }
    }
}
