import AppStoreServer
import Foundation
import MockAppStore
import PostgresNIO
import Reconciler
import ReconcilerDomain
import ReconcilerShared
import ReconcilerStore
import TestSupport
import Testing

/// A dry run writes its state into copies (`ShadowSchema.tables`), never into the real tables.
/// The check cannot drift from the schema: every table the migrations create is watched by a
/// trigger that records each statement writing it, and only the tables listed below may be
/// written for real; a table a run writes that is neither shadowed nor listed fails the test.
@Suite struct ShadowSchemaTests {
    /// Tables a dry run writes for real: the run's own bookkeeping (its record, shards, counts,
    /// queue, lease, timeline, budget, quarantine), which say what the dry run did and must outlive
    /// its shadow schema. Everything else a run writes must be in `ShadowSchema.tables`.
    static let writtenForReal: Set<String> = [
        "reconcile_runs", "run_shards", "run_counts", "run_changes", "run_rejections", "run_leases", "gap_queue", "given_up",
        "quarantined_payloads", "run_api_seconds", "run_api_budgets", "api_processes", "api_closures",
    ]
    /// Tables written by a trigger of a shadowed table: the shadow copies (`LIKE ... INCLUDING ALL`)
    /// carry no triggers, so a dry run leaves them alone.
    static let writtenByTriggersOfShadowedTables: Set<String> = ["forward_queue_totals"]

    @Test func aRunWritesOnlyShadowedTablesAndADryRunNoRealOne() async throws {
        try await TestDatabase.with { db in
            let tables = Set(try await db.strings("SELECT tablename::text FROM pg_tables WHERE schemaname = current_schema()"))
            #expect(tables.isSuperset(of: Set(ShadowSchema.tables).union(Self.writtenForReal)), "a listed table does not exist")
            try await Self.watchWrites(of: tables, in: db)

            let now = Int64(Date().timeIntervalSince1970 * 1000)
            let hour: Int64 = 3_600_000
            let scenario = ScenarioConfiguration(
                seed: 34, customers: 12, now: now, span: 24 * hour, outageStart: now - 20 * hour, outageEnd: now - hour)
            try await MockAppStore.withRunning(.init(scenario: scenario)) { mock, baseURL in
                let verifier = try mock.verifier()
                func run(_ window: TimeWindow, dryRun: Bool) async throws -> RunReport {
                    let options = RunOptions(refreshStatus: true, forwardTo: ForwardingTarget(url: "https://app.example.com/apple"))
                    return try await ReconcileRun(
                        configuration: .init(window: window, dryRun: dryRun, options: options),
                        scope: AppScope(target: verifier.configuration.target, entitlement: .init()), database: db.database, verifier: verifier,
                        client: mock.client(baseURL: baseURL)
                    ).reconcile(progress: RunProgress())
                }

                // A subscription of the app that ran out an hour ago: the real run writes its `time` row
                // (`entitlement_instants` with it); a dry run writes none. Checked since: no customer to read.
                let target = verifier.configuration.target
                try await db.execute(
                    """
                    INSERT INTO purchases (bundle_id, environment, original_transaction_id, product_type, purchase_date_ms, expires_date_ms,
                                           history_checked_at_ms)
                    VALUES (\(target.bundleId), \(target.environment.rawValue), 'lapsed-1', 'Auto-Renewable Subscription', \(now - 30 * 24 * hour),
                            \(now - hour), \(now))
                    """)
                // A real run over the first part of the outage: what it writes is shadowed, or listed.
                let real = try await run(TimeWindow(milliseconds: (now - 23 * hour)..<(now - 10 * hour)), dryRun: false)
                #expect(real.notifications.applied > 0)
                let written = try await Self.writtenTables(in: db)
                // It wrote every shadowed table, so a dry run that left one of them out would write it for real.
                #expect(written.isSuperset(of: ShadowSchema.tables), "the run left \(Set(ShadowSchema.tables).subtracting(written).sorted()) alone")
                let unshadowed = written.subtracting(ShadowSchema.tables).subtracting(Self.writtenForReal)
                    .subtracting(Self.writtenByTriggersOfShadowedTables)
                #expect(unshadowed.isEmpty, "a run writes \(unshadowed.sorted()), which ShadowSchema.tables does not shadow")

                // A dry run over the whole outage changes no real table but the ledger's.
                try await db.execute("TRUNCATE reconciler_test_audit.writes")
                let state = Array(tables.subtracting(Self.writtenForReal)).sorted()
                let before = try await Self.contents(of: state, in: db)
                let dry = try await run(TimeWindow(milliseconds: (now - 23 * hour)..<now), dryRun: true)
                #expect(dry.dryRun && dry.notifications.applied > 0 && dry.changesTotal > 0)
                let dryWritten = try await Self.writtenTables(in: db).subtracting(Self.writtenForReal)
                #expect(dryWritten.isEmpty, "a dry run wrote the real \(dryWritten.sorted())")
                #expect(try await Self.contents(of: state, in: db) == before)
            }
        }
    }

    /// Puts a statement trigger on each of `tables` that records the table in
    /// `reconciler_test_audit.writes`, for every statement that inserts, updates, deletes or truncates.
    static func watchWrites(of tables: Set<String>, in db: TestDatabase) async throws {
        try await db.execute("CREATE SCHEMA reconciler_test_audit")
        try await db.execute("CREATE TABLE reconciler_test_audit.writes (table_name text NOT NULL, operation text NOT NULL)")
        try await db.execute(
            """
            CREATE FUNCTION reconciler_test_audit.record() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN INSERT INTO reconciler_test_audit.writes VALUES (TG_TABLE_NAME, TG_OP); RETURN NULL; END $$
            """)
        for table in tables.sorted() {
            try await db.execute(
                PostgresQuery(
                    unsafeSQL: """
                        CREATE TRIGGER reconciler_test_audit AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON \(table)
                        FOR EACH STATEMENT EXECUTE FUNCTION reconciler_test_audit.record()
                        """))
        }
    }

    static func writtenTables(in db: TestDatabase) async throws -> Set<String> {
        Set(try await db.strings("SELECT DISTINCT table_name FROM reconciler_test_audit.writes"))
    }

    /// Each table's rows, as a digest per table.
    static func contents(of tables: [String], in db: TestDatabase) async throws -> [String: String] {
        var digests: [String: String] = [:]
        for table in tables {
            digests[table] = try await db.strings(
                PostgresQuery(unsafeSQL: "SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) FROM \(table) t")
            ).first
        }
        return digests
    }
}
