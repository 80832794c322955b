import AppStoreServer
import Logging
import PostgresNIO
import ReconcilerDomain
import ReconcilerShared
import TestSupport
import Testing

@testable import ReconcilerStore

/// The live path's statements are prepared per connection (``PreparedSQL``). postgres-nio keeps a
/// failed preparation for the connection's life, so a statement first prepared inside a
/// transaction that had already failed must not leave its connection failing it for ever.
@Suite struct PreparedStatementTests {
    @Test func aPreparationThatFailedDoesNotBreakTheConnectionForLaterTransactions() async throws {
        try await TestDatabase.with { db in
            let store = PurchaseStore(
                logger: Logger(label: "test"),
                scope: AppScope(target: AppTarget(bundleId: TestApp.bundleId, environment: .production), entitlement: .init()))
            // The transaction fails first (division by zero, the error ignored), so preparing the
            // purchase states' statement, never prepared on this connection yet, fails too.
            await #expect(throws: (any Error).self) {
                try await db.database.transaction { transaction in
                    try? await transaction.run("SELECT 1 / 0", logger: Logger(label: "test"))
                    return try await store.purchaseStates(["1"], on: transaction).count
                }
            }
            // The same statement, in transactions on the client's connections (the one that failed
            // is closed, not lent again).
            for _ in 0..<4 {
                let count = try await db.database.transaction { try await store.purchaseStates(["1"], on: $0).count }
                #expect(count == 0)
            }
        }
    }

    /// PostgreSQL caches a prepared statement's generic plan after five runs, for the connection's
    /// life or until the table is analyzed. Cached while `notifications` was empty, the page lock's
    /// look-up of recorded notifications was a scan of the whole table for every later batch.
    @Test func aPlanCachedWhileTheTablesWereEmptyStillLooksUpByKey() async throws {
        try await TestDatabase.with { db in
            let logger = Logger(label: "test")
            let store = PurchaseStore(
                logger: logger, scope: AppScope(target: AppTarget(bundleId: TestApp.bundleId, environment: .production), entitlement: .init()))
            // One connection, so every transaction below runs on the connection that cached the plan.
            let sequentialScans = try await Self.withOneConnection(db) { database in
                for round in 0..<8 {
                    try await database.transaction { try await store.lock(purchases: [], purchasesByNotification: ["u\(round)": "1"], on: $0) }
                }
                try await db.execute(
                    """
                    INSERT INTO notifications (notification_uuid, notification_type, signed_date_ms, environment, bundle_id, signed_payload,
                        source, outcome, payload_form)
                    SELECT 'stored-' || g, 'TEST', 1, 'Production', \(TestApp.bundleId), 'x', 'webhook', 'recorded', 'whole'
                    FROM generate_series(1, 5000) g
                    """)
                return try await database.transaction { transaction in
                    try await store.lock(purchases: [], purchasesByNotification: ["stored-7": "1", "new": "2"], on: transaction)
                    // Sequential scans of the table in this transaction (before it ends).
                    let rows = try await transaction.query("SELECT pg_stat_get_xact_numscans('notifications'::regclass)", logger: logger)
                    for try await scans in rows.decode(Int64.self) { return scans }
                    return -1
                }
            }
            #expect(sequentialScans == 0)
        }
    }

    /// With prepared statements off (a pool such as PgBouncer before 1.21 that cannot keep them), the
    /// same statements run unnamed: the session holds no prepared statement, and they still work.
    @Test(arguments: [true, false])
    func preparedStatementsCanBeTurnedOffForPoolsThatCannotKeepThem(_ prepared: Bool) async throws {
        try await TestDatabase.with { db in
            let logger = Logger(label: "test")
            let store = PurchaseStore(
                logger: logger, scope: AppScope(target: AppTarget(bundleId: TestApp.bundleId, environment: .production), entitlement: .init()))
            let held = try await Self.withOneConnection(db, configuration: .init(preparedStatements: prepared)) { database in
                try await database.transaction { transaction in
                    try await store.lock(purchases: [], purchasesByNotification: ["u": "1"], on: transaction)
                    #expect(try await store.purchaseStates(["1"], on: transaction).isEmpty)
                    let rows = try await transaction.query("SELECT count(*)::int FROM pg_prepared_statements", logger: logger)
                    for try await count in rows.decode(Int.self) { return count }
                    return -1
                }
            }
            #expect(prepared ? held == 2 : held == 0)
        }
    }

    /// Runs `work` with a database of one pooled connection (every transaction on one session),
    /// its client running beside it.
    static func withOneConnection<Result: Sendable>(
        _ db: TestDatabase, configuration: Database.Configuration = .init(), _ work: @escaping @Sendable (Database) async throws -> Result
    ) async throws -> Result {
        let database = try Database(
            settings: DatabaseSettings(url: db.url, maximumConnections: 1), logger: Logger(label: "test"), configuration: configuration)
        return try await withThrowingTaskGroup(of: Result?.self) { group in
            group.addTask {
                try await database.run()
                return nil
            }
            group.addTask { try await work(database) }
            while let finished = try await group.next() {
                guard let result = finished else { continue }
                group.cancelAll()
                return result
            }
            throw CancellationError()
        }
    }
}
