import AppStoreServer
import Foundation
import Logging
import PostgresNIO
import ReconcilerShared

/// The SQL of the run's own tables: runs and their lease, shard checkpoints, counts, changes,
/// rejections and the quarantine, and the phase-2 customer queue. Writes that belong to a page
/// run on the caller's connection, in the page's transaction; the rest run in short transactions
/// of their own. The ledger never writes App Store state (that is ``PurchaseStore``'s).
public struct RunLedger: Sendable {
    /// The real tables, never a dry run's shadow.
    public let database: Database
    public var logger: Logger { database.logger }

    public init(database: Database) {
        self.database = database.shadowed(by: nil)
    }

    static let runColumns = """
        run_id, kind, environment, bundle_id, window_start_ms, window_end_ms, dry_run, options::text, status, phase,
        started_at, updated_at, finished_at, holder, failure
        """

    typealias RunRow = (Int64, String, String, String, Int64, Int64, Bool, String, String, String, Date, Date, Date?, String?, String?)

    static func record(_ row: RunRow) throws -> RunRecord {
        RunRecord(
            runId: row.0, kind: RunRecord.Kind(rawValue: row.1) ?? .manual, environment: row.2, bundleId: row.3, windowStart: row.4,
            windowEnd: row.5, dryRun: row.6, options: try JSONDecoder().decode(RunOptions.self, from: Data(row.7.utf8)),
            status: RunRecord.Status(rawValue: row.8) ?? .failed, phase: RunRecord.Phase(rawValue: row.9) ?? .done,
            startedAt: row.10, updatedAt: row.11, finishedAt: row.12, holder: row.13, failure: row.14)
    }

    /// Runs `body` in a short transaction of its own.
    @discardableResult
    func read<Result: Sendable>(_ body: @Sendable (PostgresConnection) async throws -> Result) async throws -> Result {
        try await database.transaction(body)
    }

    // MARK: Runs

    /// The runs a query selects (it selects `runColumns`), in its order.
    private func runs(_ query: PostgresQuery) async throws -> [RunRecord] {
        let logger = self.logger
        return try await read { connection in
            var runs: [RunRecord] = []
            for try await row in try await connection.query(query, logger: logger).decode(RunRow.self) { runs.append(try Self.record(row)) }
            return runs
        }
    }

    /// The run to continue for this window: the newest one unless it is finished.
    public func resumableRun(environment: String, bundleId: String, windowStart: Int64, windowEnd: Int64, dryRun: Bool) async throws -> RunRecord? {
        let newest = try await runs("""
            SELECT \(unescaped: Self.runColumns) FROM reconcile_runs
            WHERE environment = \(environment) AND bundle_id = \(bundleId) AND window_start_ms = \(windowStart)
              AND window_end_ms = \(windowEnd) AND dry_run = \(dryRun)
            ORDER BY run_id DESC LIMIT 1
            """).first
        return newest.flatMap { $0.status.isFinished ? nil : $0 }
    }

    public func run(id: Int64) async throws -> RunRecord? {
        try await runs("SELECT \(unescaped: Self.runColumns) FROM reconcile_runs WHERE run_id = \(id)").first
    }

    /// The most recent runs, newest first.
    public func recentRuns(limit: Int) async throws -> [RunRecord] {
        try await runs("SELECT \(unescaped: Self.runColumns) FROM reconcile_runs ORDER BY run_id DESC LIMIT \(limit)")
    }

    /// The newest window of the schedule's chain (`--since-last`), finished or not.
    public func newestScheduledRun(environment: String, bundleId: String) async throws -> RunRecord? {
        try await runs("""
            SELECT \(unescaped: Self.runColumns) FROM reconcile_runs
            WHERE environment = \(environment) AND bundle_id = \(bundleId) AND kind = 'scheduled' AND NOT dry_run
            ORDER BY run_id DESC LIMIT 1
            """).first
    }

    /// The end of the newest finished (not dry) run's window, of any kind.
    public func lastFinishedWindowEnd(environment: String, bundleId: String) async throws -> Int64? {
        try await read { [logger] connection in
            let rows = try await connection.query("""
                SELECT max(window_end_ms) FROM reconcile_runs
                WHERE environment = \(environment) AND bundle_id = \(bundleId) AND NOT dry_run
                  AND status IN ('succeeded', 'succeeded_with_rejections')
                """, logger: logger)
            for try await value in rows.decode(Int64?.self) { return value }
            return nil
        }
    }

    /// When a (non dry) run of this app last succeeded, with or without rejections.
    public func lastSuccessTime(environment: String, bundleId: String) async throws -> Date? {
        try await read { [logger] connection in
            let rows = try await connection.query("""
                SELECT max(finished_at) FROM reconcile_runs
                WHERE environment = \(environment) AND bundle_id = \(bundleId) AND NOT dry_run
                  AND status IN ('succeeded', 'succeeded_with_rejections')
                """, logger: logger)
            for try await value in rows.decode(Date?.self) { return value }
            return nil
        }
    }

    /// Creates a run with its shards.
    public func createRun(kind: RunRecord.Kind, environment: String, bundleId: String, windowStart: Int64, windowEnd: Int64, dryRun: Bool,
                          options: RunOptions, shards: [ReplayPlanner.Shard], holder: String) async throws -> RunRecord {
        let optionsJSON = String(decoding: try JSONEncoder().encode(options), as: UTF8.self)
        struct ShardColumns: Encodable {
            var query_index: Int
            var notification_type: String?
            var subtype: String?
            var shard_start_ms: Int64
            var shard_end_ms: Int64
        }
        let shardsJSON = try PurchaseStore.json(shards.map {
            ShardColumns(query_index: $0.queryIndex, notification_type: $0.filter.notificationType?.rawValue,
                         subtype: $0.filter.notificationSubtype?.rawValue, shard_start_ms: $0.start, shard_end_ms: $0.end)
        })
        let logger = self.logger
        return try await read { connection in
            let rows = try await connection.query("""
                INSERT INTO reconcile_runs (kind, environment, bundle_id, window_start_ms, window_end_ms, dry_run, options, holder)
                VALUES (\(kind.rawValue), \(environment), \(bundleId), \(windowStart), \(windowEnd), \(dryRun), \(optionsJSON)::jsonb, \(holder))
                RETURNING \(unescaped: Self.runColumns)
                """, logger: logger)
            var created: RunRecord?
            for try await row in rows.decode(RunRow.self) { created = try Self.record(row) }
            guard let run = created else { throw PurchaseStoreError(description: "the run was not created") }
            try await connection.query("""
                INSERT INTO run_shards (run_id, query_index, notification_type, subtype, shard_start_ms, shard_end_ms)
                SELECT \(run.runId), query_index, notification_type, subtype, shard_start_ms, shard_end_ms
                FROM jsonb_populate_recordset(NULL::run_shards, \(shardsJSON)::jsonb)
                """, logger: logger)
            return run
        }
    }

    /// Marks a run as running by this process again; failed shards and customers get another try.
    public func resume(runId: Int64, holder: String) async throws {
        try await read { [logger] connection in
            try await connection.query("""
                UPDATE reconcile_runs SET status = 'running', holder = \(holder), updated_at = now(), finished_at = NULL, failure = NULL
                WHERE run_id = \(runId)
                """, logger: logger)
            try await connection.query("""
                UPDATE run_shards SET status = 'pending', last_error = NULL, failure_kind = NULL WHERE run_id = \(runId) AND status = 'failed'
                """, logger: logger)
            try await connection.query("""
                UPDATE gap_queue SET status = 'pending', failure_kind = NULL, updated_at = now() WHERE run_id = \(runId) AND status = 'failed'
                """, logger: logger)
            // Shards left to replay send the run back to phase 1; otherwise it continues with phase 2.
            try await connection.query("""
                UPDATE reconcile_runs SET phase = CASE
                    WHEN EXISTS (SELECT 1 FROM run_shards WHERE run_id = \(runId) AND status <> 'done') THEN 'replay' ELSE 'gap_fill' END
                WHERE run_id = \(runId)
                """, logger: logger)
        }
    }

    public func setPhase(runId: Int64, _ phase: RunRecord.Phase) async throws {
        try await read { [logger] connection in
            try await connection.query(
                "UPDATE reconcile_runs SET phase = \(phase.rawValue), updated_at = now() WHERE run_id = \(runId)", logger: logger)
        }
    }

    /// Records how a run ended, with the API statistics of this process and the report.
    public func finish(runId: Int64, status: RunRecord.Status, failure: String? = nil, apiStatistics: APIStatistics.Snapshot,
                       report: String?) async throws {
        let statistics = String(decoding: try JSONEncoder().encode(apiStatistics), as: UTF8.self)
        try await read { [logger] connection in
            try await connection.query("""
                UPDATE reconcile_runs SET status = \(status.rawValue), failure = \(failure),
                    phase = CASE WHEN \(status.rawValue) IN ('interrupted', 'failed', 'partial') THEN phase ELSE 'done' END,
                    updated_at = now(), finished_at = now(), report = COALESCE(\(report)::jsonb, report)
                WHERE run_id = \(runId)
                """, logger: logger)
            try await Self.addAPIStatistics(runId: runId, statistics, on: connection, logger: logger)
        }
    }

    /// Adds a process's API statistics to a run's (every process that worked on a run adds its own).
    public func addAPIStatistics(runId: Int64, _ apiStatistics: APIStatistics.Snapshot) async throws {
        let statistics = String(decoding: try JSONEncoder().encode(apiStatistics), as: UTF8.self)
        try await read { [logger] connection in try await Self.addAPIStatistics(runId: runId, statistics, on: connection, logger: logger) }
    }

    private static func addAPIStatistics(runId: Int64, _ statistics: String, on connection: PostgresConnection, logger: Logger) async throws {
        try await connection.query("""
            UPDATE reconcile_runs SET api_statistics = (SELECT jsonb_object_agg(key, COALESCE((api_statistics ->> key)::bigint, 0) + value::bigint)
                                                        FROM jsonb_each_text(\(statistics)::jsonb))
            WHERE run_id = \(runId)
            """, logger: logger)
    }

    public func apiStatistics(runId: Int64) async throws -> APIStatistics.Snapshot {
        try await read { [logger] connection in
            let rows = try await connection.query("SELECT api_statistics::text FROM reconcile_runs WHERE run_id = \(runId)", logger: logger)
            for try await text in rows.decode(String.self) {
                return (try? JSONDecoder().decode(APIStatistics.Snapshot.self, from: Data(text.utf8))) ?? .zero
            }
            return .zero
        }
    }

    // MARK: Shards

    public func shards(runId: Int64) async throws -> [ShardRecord] {
        try await read { [logger] connection in
            let rows = try await connection.query("""
                SELECT query_index, notification_type, subtype, shard_start_ms, shard_end_ms, pagination_token, pages_done,
                       notifications_seen, restarts, status, failure_kind, last_error
                FROM run_shards WHERE run_id = \(runId) ORDER BY query_index, shard_start_ms
                """, logger: logger)
            var shards: [ShardRecord] = []
            for try await row in rows.decode((Int, String?, String?, Int64, Int64, String?, Int, Int, Int, String, String?, String?).self) {
                shards.append(ShardRecord(
                    shard: .init(queryIndex: row.0, filter: .init(row.1.map(NotificationTypeV2.init(rawValue:)), row.2.map(Subtype.init(rawValue:))),
                                 start: row.3, end: row.4),
                    paginationToken: row.5, pagesDone: row.6, notificationsSeen: row.7, restarts: row.8,
                    status: ShardRecord.Status(rawValue: row.9) ?? .pending, failureKind: row.10.flatMap(FailureKind.init(rawValue:)),
                    lastError: row.11))
            }
            return shards
        }
    }

    /// A checkpoint that did not advance: the shard is not where this process read it.
    public struct CheckpointConflict: Error, CustomStringConvertible, Sendable {
        /// The shard is exactly where this page would have put it: the page committed before (its
        /// commit's answer was lost), so this attempt must change nothing.
        public var alreadyCommitted: Bool
        public var description: String {
            alreadyCommitted
                ? "the page was already committed"
                : "another process moved the shard's checkpoint: this process no longer owns the run"
        }
    }

    /// A page's checkpoint: where the shard continues, and whether it is finished. It advances
    /// only from the position the page was fetched from, so two processes can never both apply
    /// the shard's pages; throws ``CheckpointConflict`` when it is not there.
    public func checkpoint(runId: Int64, shard: ReplayPlanner.Shard, from position: ShardRecord.Position, nextToken: String?, done: Bool,
                           notificationsSeen: Int, on connection: PostgresConnection) async throws {
        let rows = try await connection.query("""
            UPDATE run_shards SET pagination_token = \(nextToken), pages_done = pages_done + 1,
                notifications_seen = notifications_seen + \(notificationsSeen), status = \(done ? "done" : "pending"), last_error = NULL
            WHERE run_id = \(runId) AND query_index = \(shard.queryIndex) AND shard_start_ms = \(shard.start)
              AND pagination_token IS NOT DISTINCT FROM \(position.paginationToken) AND pages_done = \(position.pagesDone)
            RETURNING 1
            """, logger: logger)
        var advanced = false
        for try await _ in rows { advanced = true }
        guard !advanced else { return }
        let check = try await connection.query("""
            SELECT 1 FROM run_shards
            WHERE run_id = \(runId) AND query_index = \(shard.queryIndex) AND shard_start_ms = \(shard.start)
              AND pagination_token IS NOT DISTINCT FROM \(nextToken) AND pages_done = \(position.pagesDone + 1)
            """, logger: logger)
        var committed = false
        for try await _ in check { committed = true }
        throw CheckpointConflict(alreadyCommitted: committed)
    }

    /// Starts a shard over after its pagination token expired; returns the new position.
    public func restartShard(runId: Int64, shard: ReplayPlanner.Shard, from position: ShardRecord.Position) async throws -> ShardRecord.Position {
        try await read { [logger] connection in
            let rows = try await connection.query("""
                UPDATE run_shards SET pagination_token = NULL, restarts = restarts + 1
                WHERE run_id = \(runId) AND query_index = \(shard.queryIndex) AND shard_start_ms = \(shard.start)
                  AND pagination_token IS NOT DISTINCT FROM \(position.paginationToken) AND pages_done = \(position.pagesDone)
                RETURNING pages_done
                """, logger: logger)
            for try await pages in rows.decode(Int.self) { return ShardRecord.Position(paginationToken: nil, pagesDone: pages) }
            throw CheckpointConflict(alreadyCommitted: false)
        }
    }

    public func failShard(runId: Int64, shard: ReplayPlanner.Shard, kind: FailureKind, error: String) async throws {
        try await read { [logger] connection in
            try await connection.query("""
                UPDATE run_shards SET status = 'failed', failure_kind = \(kind.rawValue), last_error = \(error)
                WHERE run_id = \(runId) AND query_index = \(shard.queryIndex) AND shard_start_ms = \(shard.start)
                """, logger: logger)
        }
    }

    // MARK: What a run saw and changed

    /// Adds notification outcome counts by `TYPE/SUBTYPE` (`rejected` for refused values).
    public func addCounts(runId: Int64, _ outcomes: [(typeAndSubtype: String, outcome: String)], on connection: PostgresConnection) async throws {
        struct Key: Hashable, Encodable {
            var type_and_subtype: String
            var outcome: String
        }
        struct Row: Encodable {
            var type_and_subtype: String
            var outcome: String
            var count: Int
        }
        let counts = Dictionary(grouping: outcomes.map { Key(type_and_subtype: $0.typeAndSubtype, outcome: $0.outcome) }) { $0 }
            .map { Row(type_and_subtype: $0.key.type_and_subtype, outcome: $0.key.outcome, count: $0.value.count) }
            .sorted { ($0.type_and_subtype, $0.outcome) < ($1.type_and_subtype, $1.outcome) }
        guard !counts.isEmpty else { return }
        try await connection.query("""
            INSERT INTO run_counts (run_id, type_and_subtype, outcome, count)
            SELECT \(runId), type_and_subtype, outcome, count FROM jsonb_populate_recordset(NULL::run_counts, \(try PurchaseStore.json(counts))::jsonb)
            ON CONFLICT (run_id, type_and_subtype, outcome) DO UPDATE SET count = run_counts.count + EXCLUDED.count
            """, logger: logger)
    }

    /// Records purchases that changed: the first `before` is kept, `after` is the latest.
    public func recordChanges(runId: Int64, _ changes: [PurchaseChange], on connection: PostgresConnection) async throws {
        var byPurchase: [String: PurchaseChange] = [:]
        for change in changes where change.isChange {
            let id = change.after.originalTransactionId
            byPurchase[id] = PurchaseChange(before: byPurchase[id].map(\.before) ?? change.before, after: change.after)
        }
        guard !byPurchase.isEmpty else { return }
        struct Row: Encodable {
            var original_transaction_id: String
            var before_state: PurchaseState?
            var after_state: PurchaseState
        }
        let rows = byPurchase.keys.sorted().map { Row(original_transaction_id: $0, before_state: byPurchase[$0]!.before, after_state: byPurchase[$0]!.after) }
        try await connection.query("""
            INSERT INTO run_changes (run_id, original_transaction_id, before_state, after_state)
            SELECT \(runId), original_transaction_id, before_state, after_state
            FROM jsonb_populate_recordset(NULL::run_changes, \(try PurchaseStore.json(rows))::jsonb)
            ON CONFLICT (run_id, original_transaction_id) DO UPDATE SET after_state = EXCLUDED.after_state
            """, logger: logger)
    }

    public func counts(runId: Int64) async throws -> [String: [String: Int]] {
        try await read { [logger] connection in
            let rows = try await connection.query(
                "SELECT type_and_subtype, outcome, count FROM run_counts WHERE run_id = \(runId)", logger: logger)
            var result: [String: [String: Int]] = [:]
            for try await (type, outcome, count) in rows.decode((String, String, Int).self) { result[type, default: [:]][outcome] = count }
            return result
        }
    }

    public func changes(runId: Int64) async throws -> [PurchaseChange] {
        try await read { [logger] connection in
            let rows = try await connection.query("""
                SELECT before_state::text, after_state::text FROM run_changes
                WHERE run_id = \(runId) AND before_state IS DISTINCT FROM after_state ORDER BY original_transaction_id
                """, logger: logger)
            var result: [PurchaseChange] = []
            let decoder = JSONDecoder()
            for try await (before, after) in rows.decode((String?, String).self) {
                result.append(PurchaseChange(
                    before: try before.map { try decoder.decode(PurchaseState.self, from: Data($0.utf8)) },
                    after: try decoder.decode(PurchaseState.self, from: Data(after.utf8))))
            }
            return result
        }
    }
}
