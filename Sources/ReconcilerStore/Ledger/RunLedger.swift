package import AppStoreServer
package import Foundation
package import Logging
import PostgresNIO
package import ReconcilerDomain
package import ReconcilerShared

/// The SQL of the run's own tables: runs and their lease, shard checkpoints, counts, changes,
/// rejections and the quarantine, and the phase-2 customer queue. Writes that belong to a page
/// run on the caller's connection, in the page's transaction; the rest run in short transactions
/// of their own. The ledger never writes App Store state (that is ``PurchaseStore``'s).
package struct RunLedger: Sendable {
    /// The real tables, never a dry run's shadow.
    package let database: Database
    package var logger: Logger { database.logger }

    package init(database: Database) {
        self.database = database.shadowed(by: nil)
    }

    static let runColumns = """
        run_id, kind, environment, bundle_id, window_start_ms, window_end_ms, dry_run, options::text AS options, status, phase,
        started_at, updated_at, finished_at, holder, failure, replay_finished_at
        """

    /// A run from a row that selects ``runColumns``.
    static func record(_ row: PostgresRow) throws -> RunRecord {
        let columns = NamedColumns(row)
        let options: String = try columns["options"]
        return RunRecord(
            runId: try columns["run_id"], kind: try columns.stored("kind", of: "reconcile_runs"), environment: try columns["environment"],
            bundleId: try columns["bundle_id"], window: TimeWindow(start: try columns["window_start_ms"], end: try columns["window_end_ms"]),
            dryRun: try columns["dry_run"], options: try JSONDecoder().decode(RunOptions.self, from: Data(options.utf8)),
            status: try columns.stored("status", of: "reconcile_runs"), phase: try columns.stored("phase", of: "reconcile_runs"),
            startedAt: try columns["started_at"], updatedAt: try columns["updated_at"], finishedAt: try columns["finished_at"],
            holder: try columns["holder"], failure: try columns["failure"], replayFinishedAt: try columns["replay_finished_at"])
    }

    /// Runs `body` in a short transaction of its own.
    @discardableResult
    package func read<Result: Sendable>(_ body: @escaping @Sendable (DatabaseTransaction) async throws -> Result) async throws -> Result {
        try await database.transaction(body)
    }

    // MARK: Runs

    /// The runs a query selects (it selects `runColumns`), in its order.
    private func runs(_ query: PostgresQuery) async throws -> [RunRecord] {
        let logger = self.logger
        return try await read { transaction in
            var runs: [RunRecord] = []
            for try await row in try await transaction.query(query, logger: logger) { runs.append(try Self.record(row)) }
            return runs
        }
    }

    /// The run to continue for this window: the newest one unless it is finished (repairs are not resumed).
    package func resumableRun(app: AppTarget, window: TimeWindow, dryRun: Bool) async throws -> RunRecord? {
        let newest = try await runs(
            """
            SELECT \(unescaped: Self.runColumns) FROM reconcile_runs
            WHERE environment = \(app.environment) AND bundle_id = \(app.bundleId) AND window_start_ms = \(window.start)
              AND window_end_ms = \(window.end) AND dry_run = \(dryRun) AND kind NOT IN ('repair', 'import')
            ORDER BY run_id DESC LIMIT 1
            """
        ).first
        return newest.flatMap { $0.status.isFinished ? nil : $0 }
    }

    package func run(id: Int64) async throws -> RunRecord? {
        try await runs("SELECT \(unescaped: Self.runColumns) FROM reconcile_runs WHERE run_id = \(id)").first
    }

    /// The most recent runs, newest first: of one app and environment, or (`nil`) of every one.
    package func recentRuns(limit: Int, of target: AppTarget? = nil) async throws -> [RunRecord] {
        let (bundleId, environment) = (target?.bundleId, target?.environment)
        return try await runs(
            """
            SELECT \(unescaped: Self.runColumns) FROM reconcile_runs
            WHERE \(bundleId)::text IS NULL OR (bundle_id = \(bundleId) AND environment = \(environment))
            ORDER BY run_id DESC LIMIT \(limit)
            """)
    }

    /// The newest window of the schedule's chain (`--since-last`), finished or not.
    package func newestScheduledRun(app: AppTarget) async throws -> RunRecord? {
        try await runs(
            """
            SELECT \(unescaped: Self.runColumns) FROM reconcile_runs
            WHERE environment = \(app.environment) AND bundle_id = \(app.bundleId) AND kind = 'scheduled' AND NOT dry_run
            ORDER BY run_id DESC LIMIT 1
            """
        ).first
    }

    /// The unfinished windows of the schedule's chain, oldest first: every `run --since-last`
    /// retries them before its newest window.
    package func unfinishedScheduledRuns(app: AppTarget) async throws -> [RunRecord] {
        try await runs(
            """
            SELECT \(unescaped: Self.runColumns) FROM reconcile_runs
            WHERE environment = \(app.environment) AND bundle_id = \(app.bundleId) AND kind = 'scheduled' AND NOT dry_run
              AND status NOT IN ('succeeded', 'succeeded_with_rejections', 'lost')
            ORDER BY run_id
            """)
    }

    /// Where the finished runs of an app and environment reached: the end of the newest window, and when it finished.
    package struct FinishedRuns: Sendable, Hashable {
        package var windowEnd: Timestamp
        package var finishedAt: Date
    }

    /// The newest finished (not dry) run of any kind but a repair (one customer says nothing about
    /// a window): the end of its window, and when it finished.
    package func lastFinished(app: AppTarget) async throws -> FinishedRuns? {
        try await read { [logger] transaction in
            let rows = try await transaction.query(
                """
                SELECT max(window_end_ms), max(finished_at) FROM reconcile_runs
                WHERE environment = \(app.environment) AND bundle_id = \(app.bundleId) AND NOT dry_run AND kind NOT IN ('repair', 'import')
                  AND status IN ('succeeded', 'succeeded_with_rejections')
                """, logger: logger)
            for try await (windowEnd, finishedAt) in rows.decode((Timestamp?, Date?).self) {
                guard let windowEnd, let finishedAt else { return nil }
                return FinishedRuns(windowEnd: windowEnd, finishedAt: finishedAt)
            }
            return nil
        }
    }

    /// Creates a run with its shards.
    package func createRun(
        kind: RunRecord.Kind, app: AppTarget, window: TimeWindow, dryRun: Bool,
        options: RunOptions, shards: [ReplayPlanner.Shard], holder: String
    ) async throws -> RunRecord {
        let optionsJSON = String(decoding: try JSONEncoder().encode(options), as: UTF8.self)
        let shardsJSON = try PurchaseStore.json(shards.map(ShardColumns.init))
        let logger = self.logger
        return try await read { transaction in
            let rows = try await transaction.query(
                """
                INSERT INTO reconcile_runs (kind, environment, bundle_id, window_start_ms, window_end_ms, dry_run, options, holder)
                VALUES (\(kind.rawValue), \(app.environment), \(app.bundleId), \(window.start), \(window.end), \(dryRun), \(optionsJSON)::jsonb, \(holder))
                RETURNING \(unescaped: Self.runColumns)
                """, logger: logger)
            var created: RunRecord?
            for try await row in rows { created = try Self.record(row) }
            guard let run = created else { throw ReconcilerError(.missingRow, "the run was not created") }
            try await transaction.query(
                """
                INSERT INTO run_shards (run_id, query_index, notification_type, subtype, shard_start_ms, shard_end_ms)
                SELECT \(run.runId), query_index, notification_type, subtype, shard_start_ms, shard_end_ms
                FROM jsonb_populate_recordset(NULL::run_shards, \(shardsJSON)::jsonb)
                """, logger: logger)
            return run
        }
    }

    /// Marks a run as running by this process again; shards and customers that failed retryably
    /// get another try (what Apple refused, and what was given up, does not).
    /// Takes an unfinished run up again; with `forwardRoutes`, the rest of it forwards there (a run
    /// started without `--forward-to` and resumed with it forwards what it records from now on).
    package func resume(runId: Int64, holder: String, forwardRoutes: [ForwardingRoute] = []) async throws {
        let routes = try forwardRoutes.first.map { _ in String(decoding: try JSONEncoder().encode(forwardRoutes), as: UTF8.self) }
        let first = try forwardRoutes.first.map { String(decoding: try JSONEncoder().encode($0.target), as: UTF8.self) }
        try await read { [logger] transaction in
            try await transaction.query(
                """
                UPDATE reconcile_runs SET status = 'running', holder = \(holder), updated_at = now(), finished_at = NULL, failure = NULL,
                    options = CASE WHEN \(routes)::text IS NULL THEN options
                        ELSE jsonb_set(jsonb_set(options, '{forwardTo}', \(first)::jsonb), '{forwardRoutes}', \(routes)::jsonb) END
                WHERE run_id = \(runId)
                """, logger: logger)
            try await transaction.query(
                """
                UPDATE run_shards SET status = 'pending', last_error = NULL, failure_kind = NULL
                WHERE run_id = \(runId) AND status = 'failed' AND failure_kind IS DISTINCT FROM 'permanent'
                """, logger: logger)
            try await transaction.query(
                """
                UPDATE gap_queue SET status = 'pending', failure_kind = NULL, updated_at = now()
                WHERE run_id = \(runId) AND status = 'failed' AND failure_kind IS DISTINCT FROM 'permanent'
                """, logger: logger)
            // Shards left to replay send the run back to phase 1; otherwise it continues with phase 2.
            try await transaction.query(
                """
                UPDATE reconcile_runs SET phase = CASE
                    WHEN EXISTS (SELECT 1 FROM run_shards WHERE run_id = \(runId) AND status = 'pending') THEN 'replay' ELSE 'gap_fill' END
                WHERE run_id = \(runId)
                """, logger: logger)
        }
    }

    package func setPhase(runId: Int64, _ phase: RunRecord.Phase) async throws {
        try await read { [logger] transaction in
            try await transaction.query(
                """
                UPDATE reconcile_runs SET phase = \(phase.rawValue), updated_at = now(),
                    replay_finished_at = CASE WHEN \(phase.rawValue) = 'gap_fill' THEN now() ELSE replay_finished_at END
                WHERE run_id = \(runId)
                """, logger: logger)
        }
    }

    /// Records how a run ended, with the API statistics of this process and the report.
    package func finish(
        runId: Int64, status: RunRecord.Status, failure: String? = nil, apiStatistics: APIStatistics.Snapshot,
        report: String?
    ) async throws {
        let statistics = String(decoding: try JSONEncoder().encode(apiStatistics), as: UTF8.self)
        try await read { [logger] transaction in
            try await transaction.query(
                """
                UPDATE reconcile_runs SET status = \(status.rawValue), failure = \(failure),
                    phase = CASE WHEN \(status.rawValue) IN ('interrupted', 'failed', 'partial') THEN phase ELSE 'done' END,
                    updated_at = now(), finished_at = now(), report = COALESCE(\(report)::jsonb, report)
                WHERE run_id = \(runId)
                """, logger: logger)
            try await Self.addAPIStatistics(runId: runId, statistics, on: transaction, logger: logger)
        }
    }

    /// Adds a process's API statistics to a run's (every process that worked on a run adds its own).
    package func addAPIStatistics(runId: Int64, _ apiStatistics: APIStatistics.Snapshot) async throws {
        let statistics = String(decoding: try JSONEncoder().encode(apiStatistics), as: UTF8.self)
        try await read { [logger] transaction in try await Self.addAPIStatistics(runId: runId, statistics, on: transaction, logger: logger) }
    }

    private static func addAPIStatistics(runId: Int64, _ statistics: String, on transaction: DatabaseTransaction, logger: Logger) async throws {
        try await transaction.query(
            """
            UPDATE reconcile_runs SET api_statistics = (SELECT jsonb_object_agg(key, COALESCE((api_statistics ->> key)::bigint, 0) + value::bigint)
                                                        FROM jsonb_each_text(\(statistics)::jsonb))
            WHERE run_id = \(runId)
            """, logger: logger)
    }

    package func apiStatistics(runId: Int64) async throws -> APIStatistics.Snapshot {
        try await read { [logger] transaction in
            let rows = try await transaction.query("SELECT api_statistics::text FROM reconcile_runs WHERE run_id = \(runId)", logger: logger)
            for try await text in rows.decode(String.self) {
                return (try? JSONDecoder().decode(APIStatistics.Snapshot.self, from: Data(text.utf8))) ?? .zero
            }
            return .zero
        }
    }
}
