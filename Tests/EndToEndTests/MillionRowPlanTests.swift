import AppStoreServer
import Foundation
import PostgresNIO
import ReconcilerDomain
import ReconcilerShared
import TestSupport
import Testing

@testable import Reconciler
@testable import ReconcilerStore

/// The queries that must read indexes, at a million rows: their plans have no sequential scan, and
/// they find exactly their rows. The suite shares one private cluster and one database, loaded
/// once (``MillionRows``), which its tests only read.
@Suite(MillionRows()) struct MillionRowPlanTests {
    /// The due-customer query of every hourly run reads an index: with a million purchases, its
    /// plan has no sequential scan, and it finds exactly the purchases that fell due.
    @Test func theDueQueryReadsAnIndexAtAMillionPurchases() async throws {
        let loaded = try MillionRows.loaded
        let store = PurchaseStore(logger: TestDatabase.logger, scope: MillionRows.scope)
        let now = Timestamp(millisecondsSince1970: loaded.now)
        let due = try await loaded.db.database.transaction { try await store.customers.dueAnchors(by: now, all: false, on: $0) }
        #expect(due == (1...25).map { "due\($0)" }.sorted())
        let plan = try await loaded.db.database.transaction { try await store.customers.explainDueAnchors(by: now, on: $0) }
        #expect(!plan.contains("Seq Scan"), "\(plan)")
        #expect(plan.contains("purchases_next_due_idx"), "\(plan)")
    }

    /// The gauges every `serve` replica reads each minute, with a million delivered rows: no
    /// sequential scan of forward_queue (what waits and what failed come from partial indexes,
    /// the delivered count from a counter), and the counter holds the right number.
    @Test func theQueueGaugesScanNoDeliveredRows() async throws {
        let db = try MillionRows.loaded.db
        for query in [ForwardQueue.queueSummaryQuery(), ForwardQueue.appSummaryQuery(of: MillionRows.forwardingApp)] {
            let plan = try await db.plan(of: query)
            #expect(!plan.contains("Seq Scan on forward_queue "), "\(plan)")
        }
        let summary = try await ForwardQueue(database: db.database).summary(runIds: nil)
        #expect(summary.delivered == 1_000_000 && summary.pending == 3 && summary.failed == 0, "\(summary)")
        let ofApp = try await ForwardQueue(database: db.database).summaries(of: MillionRows.forwardingApp)
        #expect(
            ofApp.map(\.target) == [MillionRows.forwardingTarget] && ofApp.first?.summary.delivered == 1_000_000
                && ofApp.first?.summary.pending == 3)
        // What a forwarder asks while draining, and what pruning counts and removes, read indexes too.
        for query in [
            ForwardQueue.pendingDeliveriesQuery(target: MillionRows.forwardingTarget, runIds: nil),
            PurchaseStore.pruneDeliveredForwardsQuery(before: Date(timeIntervalSinceNow: -7 * 86_400), limit: nil, dryRun: true),
            PurchaseStore.pruneDeliveredForwardsQuery(before: Date(timeIntervalSinceNow: -7 * 86_400), limit: 10_000, dryRun: false),
        ] {
            let plan = try await db.plan(of: query)
            #expect(!plan.contains("Seq Scan on forward_queue "), "\(plan)")
        }
    }

    /// Recording a customer's history as checked (each customer of a run's phase 2) probes the
    /// indexes of `history_revisions` and `purchases` for that customer's rows, with a million
    /// revisions of the app: no statement scans either table, the revisions are found through their
    /// key, and it drops the revision stored under the customer's other purchase, stores the new
    /// one and links the purchases.
    @Test func aCustomersCompletionProbesIndexesAtAMillionRevisions() async throws {
        let db = try MillionRows.loaded.db
        let store = try PurchaseStore(logger: TestDatabase.logger, scope: MillionRows.scope).customers
        let checkedAt = Timestamp(millisecondsSince1970: 1_800_000_000_000)
        let queries = store.recordHistoryCheckedQueries(anchor: "c1", revision: "r2", purchases: ["c1", "c3"], checkedAt: checkedAt)
        for query in queries {
            let plan = try await db.plan(of: query)
            #expect(!plan.contains("Seq Scan"), "\(plan)")
        }
        // The revisions are found by their whole key, not filtered out of the app's.
        let delete = try await db.plan(of: queries[0]).split(separator: "\n")
        let scan = try #require(delete.firstIndex { $0.contains(" on history_revisions") }, "\(delete)")
        #expect(delete[scan...].contains { $0.contains("Index Cond") && $0.contains("anchor_transaction_id = ANY") }, "\(delete)")

        try await db.database.transaction { transaction in
            try await store.recordHistoryChecked(anchor: "c1", revision: "r2", purchases: ["c1", "c3"], checkedAt: checkedAt, on: transaction)
        }
        #expect(
            try await db.strings(
                "SELECT anchor_transaction_id || ' ' || revision FROM history_revisions WHERE anchor_transaction_id LIKE 'c%' ORDER BY 1")
                == ["c1 r2"])
        #expect(
            try await db.strings(
                """
                SELECT original_transaction_id || ' ' || history_anchor_transaction_id || ' ' || history_checked_at_ms FROM purchases
                WHERE original_transaction_id LIKE 'c%' ORDER BY 1
                """) == ["c1 c1 1800000000000", "c2 c1 1800000000000", "c3 c1 1800000000000"])
    }
}

/// The database of ``MillionRowPlanTests``, in a private cluster started and loaded once for the
/// suite (loading a million rows is a long transaction, and the change feed of every other test's
/// database waits for the oldest transaction of its cluster), stopped after its last test:
/// - a million subscriptions of ``app`` checked after their last date fell due, and 25 (`due1`...)
///   that fell due since;
/// - three notifications forwarded to ``forwardingTarget`` and waiting, and a million delivered rows;
/// - a revision for each of the million subscriptions, and a customer `c1` with a stale revision
///   under its other purchase `c2` (and `c3`, bought since, not linked yet).
struct MillionRows: SuiteTrait, TestScoping {
    struct Loaded: Sendable {
        var db: TestDatabase
        /// When the rows were loaded (ms): the due purchases fell due before it.
        var now: Int64
    }

    @TaskLocal static var current: Loaded?
    static let app = AppTarget(bundleId: "com.example.one", environment: .production)
    static let scope = AppScope(target: app, entitlement: .init())
    /// The app of the forwarded rows (``TestApp``'s, as `recordForwarded` records them).
    static let forwardingApp = AppTarget(bundleId: TestApp.bundleId, environment: .production)
    static let forwardingURL = "https://app.example.com/hook"
    static let forwardingTarget = ForwardingTarget(url: forwardingURL)

    static var loaded: Loaded {
        get throws {
            guard let current else { throw ProcessFailure(description: "MillionRows.loaded is read only inside @Suite(MillionRows())") }
            return current
        }
    }

    func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void) async throws {
        try await PrivateCluster.with { cluster in
            try await TestDatabase.with(server: cluster.url) { db in
                let now = Int64(Date().timeIntervalSince1970 * 1000)
                try await Self.load(db, now: now)
                try await Self.$current.withValue(Loaded(db: db, now: now)) { try await function() }
            }
        }
    }

    static func load(_ db: TestDatabase, now: Int64) async throws {
        try await db.execute(
            """
            INSERT INTO purchases (original_transaction_id, bundle_id, environment, product_type, status, expires_date_ms, renewal_date_ms,
                history_checked_at_ms, last_signed_date_ms)
            SELECT 'p' || i, \(app.bundleId), 'Production', 'Auto-Renewable Subscription', 1,
                   \(now) + (i % 1000 + 1)::bigint * 3600000, \(now) + (i % 1000 + 1)::bigint * 3600000, \(now) - 60000, \(now) - 86400000
            FROM generate_series(1, 1000000) AS i
            """)
        try await db.execute(
            """
            INSERT INTO purchases (original_transaction_id, bundle_id, environment, product_type, status, expires_date_ms, history_checked_at_ms)
            SELECT 'due' || i, \(app.bundleId), 'Production', 'Auto-Renewable Subscription', 1, \(now) - 1000 * i, \(now) - 7200000
            FROM generate_series(1, 25) AS i
            """)
        try await db.execute(
            """
            INSERT INTO history_revisions (bundle_id, environment, anchor_transaction_id, revision)
            SELECT \(app.bundleId), 'Production', 'p' || i, 'r' || i FROM generate_series(1, 1000000) AS i
            """)
        // A customer: c1 and c2 linked under c1, a revision left under c2, and c3 not linked yet.
        try await db.execute(
            """
            INSERT INTO purchases (original_transaction_id, bundle_id, environment, product_type, history_anchor_transaction_id)
            VALUES ('c1', \(app.bundleId), 'Production', 'Consumable', 'c1'), ('c2', \(app.bundleId), 'Production', 'Consumable', 'c1'),
                   ('c3', \(app.bundleId), 'Production', 'Consumable', NULL)
            """)
        try await db.execute(
            """
            INSERT INTO history_revisions (bundle_id, environment, anchor_transaction_id, revision)
            VALUES (\(app.bundleId), 'Production', 'c1', 'r1'), (\(app.bundleId), 'Production', 'c2', 'r0')
            """)
        // Three notifications waiting to be forwarded, as a live `serve` leaves them, and a million
        // delivered rows as forwarders leave them; the counter is moved as the UPDATE trigger moves
        // it when a forwarder records a 2xx (MetricsTests checks that trigger).
        _ = try await TestApp().recordForwarded(3, to: forwardingURL, in: db, purchasePrefix: "prune")
        try await db.execute(
            """
            INSERT INTO forward_queue (notification_uuid, bundle_id, environment, target_id, target_redacted, status, attempts, queued_at, delivered_at)
            SELECT 'delivered-' || g, \(TestApp.bundleId), 'Production', \(forwardingTarget.id), \(forwardingTarget.redacted), 'delivered', 1,
                   now() - interval '2 days', now() - interval '1 day'
            FROM generate_series(1, 1000000) g
            """)
        try await db.execute(
            """
            INSERT INTO forward_queue_totals (bundle_id, environment, target_id, target_redacted, delivered)
            VALUES (\(TestApp.bundleId), 'Production', \(forwardingTarget.id), \(forwardingTarget.redacted), 1000000)
            """)
        try await db.execute("ANALYZE purchases, history_revisions, forward_queue")
    }
}

extension TestDatabase {
    /// PostgreSQL's plan for `query` (EXPLAIN), one line per node.
    fileprivate func plan(of query: PostgresQuery) async throws -> String {
        try await strings(PostgresQuery(unsafeSQL: "EXPLAIN " + query.sql, binds: query.binds)).joined(separator: "\n")
    }
}
