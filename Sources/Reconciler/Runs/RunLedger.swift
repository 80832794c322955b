import AppStoreServer
import Crypto
import Foundation
import Logging
import PostgresNIO

/// The SQL of the run ledger: runs, shard checkpoints, counts, changes, rejections, the phase-2
/// queue and stored revisions. Writes that belong to a page run on the caller's connection, in
/// the page's transaction.
public struct RunLedger: Sendable {
    public let client: PostgresClient
    public let logger: Logger

    public init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    static let runColumns = """
        run_id, environment, bundle_id, window_start_ms, window_end_ms, dry_run, options::text, status, phase,
        started_at, updated_at, finished_at, holder
        """

    typealias RunRow = (Int64, String, String, Int64, Int64, Bool, String, String, String, Date, Date, Date?, String?)

    static func record(_ row: RunRow) throws -> RunRecord {
        RunRecord(
            runId: row.0, environment: row.1, bundleId: row.2, windowStart: row.3, windowEnd: row.4, dryRun: row.5,
            options: try JSONDecoder().decode(RunOptions.self, from: Data(row.6.utf8)),
            status: RunRecord.Status(rawValue: row.7) ?? .failed, phase: RunRecord.Phase(rawValue: row.8) ?? .done,
            startedAt: row.9, updatedAt: row.10, finishedAt: row.11, holder: row.12)
    }

    // MARK: Runs

    /// The runs a query selects (it selects `runColumns`), in its order.
    private func runs(_ query: PostgresQuery) async throws -> [RunRecord] {
        var runs: [RunRecord] = []
        for try await row in try await client.query(query, logger: logger).decode(RunRow.self) { runs.append(try Self.record(row)) }
        return runs
    }

    /// The run to continue for this window: the newest one unless it succeeded.
    public func resumableRun(environment: String, bundleId: String, windowStart: Int64, windowEnd: Int64, dryRun: Bool) async throws -> RunRecord? {
        let newest = try await runs("""
            SELECT \(unescaped: Self.runColumns) FROM reconcile_runs
            WHERE environment = \(environment) AND bundle_id = \(bundleId) AND window_start_ms = \(windowStart)
              AND window_end_ms = \(windowEnd) AND dry_run = \(dryRun)
            ORDER BY run_id DESC LIMIT 1
            """).first
        return newest?.status == .succeeded ? nil : newest
    }

    public func run(id: Int64) async throws -> RunRecord? {
        try await runs("SELECT \(unescaped: Self.runColumns) FROM reconcile_runs WHERE run_id = \(id)").first
    }

    /// The most recent runs, newest first.
    public func recentRuns(limit: Int) async throws -> [RunRecord] {
        try await runs("SELECT \(unescaped: Self.runColumns) FROM reconcile_runs ORDER BY run_id DESC LIMIT \(limit)")
    }

    /// The run marked running by another process for this app, if any.
    public func runningRun(environment: String, bundleId: String) async throws -> RunRecord? {
        try await runs("""
            SELECT \(unescaped: Self.runColumns) FROM reconcile_runs
            WHERE environment = \(environment) AND bundle_id = \(bundleId) AND status = 'running'
            ORDER BY updated_at DESC LIMIT 1
            """).first
    }

    /// The end of the newest successful (not dry) run's window.
    public func lastSuccessfulWindowEnd(environment: String, bundleId: String) async throws -> Int64? {
        let rows = try await client.query("""
            SELECT max(window_end_ms) FROM reconcile_runs
            WHERE environment = \(environment) AND bundle_id = \(bundleId) AND status = 'succeeded' AND NOT dry_run
            """, logger: logger)
        for try await value in rows.decode(Int64?.self) { return value }
        return nil
    }

    /// When a (non dry) run of this app last succeeded.
    public func lastSuccessTime(environment: String, bundleId: String) async throws -> Date? {
        let rows = try await client.query("""
            SELECT max(finished_at) FROM reconcile_runs
            WHERE environment = \(environment) AND bundle_id = \(bundleId) AND status = 'succeeded' AND NOT dry_run
            """, logger: logger)
        for try await value in rows.decode(Date?.self) { return value }
        return nil
    }

    /// Creates a run with its shards.
    public func createRun(environment: String, bundleId: String, windowStart: Int64, windowEnd: Int64, dryRun: Bool,
                          options: RunOptions, shards: [ReplayPlanner.Shard], holder: String) async throws -> RunRecord {
        let optionsJSON = String(decoding: try JSONEncoder().encode(options), as: UTF8.self)
        return try await Database(client: client, logger: logger).transaction { connection in
            let rows = try await connection.query("""
                INSERT INTO reconcile_runs (environment, bundle_id, window_start_ms, window_end_ms, dry_run, options, holder)
                VALUES (\(environment), \(bundleId), \(windowStart), \(windowEnd), \(dryRun), \(optionsJSON)::jsonb, \(holder))
                RETURNING \(unescaped: Self.runColumns)
                """, logger: logger)
            var created: RunRecord?
            for try await row in rows.decode(RunRow.self) { created = try Self.record(row) }
            guard let run = created else { throw PurchaseStoreError(description: "the run was not created") }
            try await connection.query("""
                INSERT INTO run_shards (run_id, query_index, notification_type, subtype, shard_start_ms, shard_end_ms)
                SELECT \(run.runId), q, NULLIF(t, ''), NULLIF(s, ''), a, b
                FROM unnest(\(shards.map(\.queryIndex))::int[], \(shards.map { $0.filter.notificationType?.rawValue ?? "" })::text[],
                    \(shards.map { $0.filter.notificationSubtype?.rawValue ?? "" })::text[], \(shards.map(\.start))::bigint[],
                    \(shards.map(\.end))::bigint[]) AS shard (q, t, s, a, b)
                """, logger: logger)
            return run
        }
    }

    /// Marks a run as running by this process again; failed shards and customers get another try.
    public func resume(runId: Int64, holder: String) async throws {
        try await Database(client: client, logger: logger).transaction { connection in
            try await connection.query("""
                UPDATE reconcile_runs SET status = 'running', holder = \(holder), updated_at = now(), finished_at = NULL
                WHERE run_id = \(runId)
                """, logger: logger)
            try await connection.query(
                "UPDATE run_shards SET status = 'pending', last_error = NULL WHERE run_id = \(runId) AND status = 'failed'", logger: logger)
            try await connection.query(
                "UPDATE gap_queue SET status = 'pending', updated_at = now() WHERE run_id = \(runId) AND status = 'failed'", logger: logger)
            // Shards left to replay send the run back to phase 1; otherwise it continues with phase 2.
            try await connection.query("""
                UPDATE reconcile_runs SET phase = CASE
                    WHEN EXISTS (SELECT 1 FROM run_shards WHERE run_id = \(runId) AND status <> 'done') THEN 'replay' ELSE 'gap_fill' END
                WHERE run_id = \(runId)
                """, logger: logger)
        }
    }

    public func setPhase(runId: Int64, _ phase: RunRecord.Phase) async throws {
        try await client.query(
            "UPDATE reconcile_runs SET phase = \(phase.rawValue), updated_at = now() WHERE run_id = \(runId)", logger: logger)
    }

    public func finish(runId: Int64, status: RunRecord.Status, apiStatistics: APIStatistics.Snapshot, report: String?) async throws {
        try await client.query("""
            UPDATE reconcile_runs SET status = \(status.rawValue),
                phase = CASE WHEN \(status.rawValue) = 'interrupted' THEN phase ELSE 'done' END,
                updated_at = now(), finished_at = now(), report = \(report)::jsonb
            WHERE run_id = \(runId)
            """, logger: logger)
        try await addAPIStatistics(runId: runId, apiStatistics)
    }

    /// Adds a process's API statistics to a run's (every process that worked on a run adds its own).
    public func addAPIStatistics(runId: Int64, _ apiStatistics: APIStatistics.Snapshot) async throws {
        let statistics = String(decoding: try JSONEncoder().encode(apiStatistics), as: UTF8.self)
        try await client.query("""
            UPDATE reconcile_runs SET api_statistics = (SELECT jsonb_object_agg(key, COALESCE((api_statistics ->> key)::bigint, 0) + value::bigint)
                                                        FROM jsonb_each_text(\(statistics)::jsonb))
            WHERE run_id = \(runId)
            """, logger: logger)
    }

    public func apiStatistics(runId: Int64) async throws -> APIStatistics.Snapshot {
        let rows = try await client.query("SELECT api_statistics::text FROM reconcile_runs WHERE run_id = \(runId)", logger: logger)
        for try await text in rows.decode(String.self) {
            let values = (try? JSONDecoder().decode([String: Int].self, from: Data(text.utf8))) ?? [:]
            return APIStatistics.Snapshot(
                requests: values["requests"] ?? 0, retries: values["retries"] ?? 0, rateLimited: values["rateLimited"] ?? 0,
                serverErrors: values["serverErrors"] ?? 0, transportErrors: values["transportErrors"] ?? 0,
                failedCalls: values["failedCalls"] ?? 0)
        }
        return .zero
    }

    // MARK: Shards

    public func shards(runId: Int64) async throws -> [ShardRecord] {
        let rows = try await client.query("""
            SELECT query_index, notification_type, subtype, shard_start_ms, shard_end_ms, pagination_token, pages_done,
                   notifications_seen, restarts, status, last_error
            FROM run_shards WHERE run_id = \(runId) ORDER BY query_index, shard_start_ms
            """, logger: logger)
        var shards: [ShardRecord] = []
        for try await row in rows.decode((Int, String?, String?, Int64, Int64, String?, Int, Int, Int, String, String?).self) {
            shards.append(ShardRecord(
                shard: .init(queryIndex: row.0, filter: .init(row.1.map(NotificationTypeV2.init(rawValue:)), row.2.map(Subtype.init(rawValue:))),
                             start: row.3, end: row.4),
                paginationToken: row.5, pagesDone: row.6, notificationsSeen: row.7, restarts: row.8,
                status: ShardRecord.Status(rawValue: row.9) ?? .pending, lastError: row.10))
        }
        return shards
    }

    /// A page's checkpoint: where the shard continues, and whether it is finished.
    public func checkpoint(runId: Int64, shard: ReplayPlanner.Shard, nextToken: String?, done: Bool, notificationsSeen: Int,
                           on connection: PostgresConnection) async throws {
        try await connection.query("""
            UPDATE run_shards SET pagination_token = \(nextToken), pages_done = pages_done + 1,
                notifications_seen = notifications_seen + \(notificationsSeen), status = \(done ? "done" : "pending"), last_error = NULL
            WHERE run_id = \(runId) AND query_index = \(shard.queryIndex) AND shard_start_ms = \(shard.start)
            """, logger: logger)
    }

    /// Starts a shard over after its pagination token expired.
    public func restartShard(runId: Int64, shard: ReplayPlanner.Shard) async throws {
        try await client.query("""
            UPDATE run_shards SET pagination_token = NULL, restarts = restarts + 1
            WHERE run_id = \(runId) AND query_index = \(shard.queryIndex) AND shard_start_ms = \(shard.start)
            """, logger: logger)
    }

    public func failShard(runId: Int64, shard: ReplayPlanner.Shard, error: String) async throws {
        try await client.query("""
            UPDATE run_shards SET status = 'failed', last_error = \(error)
            WHERE run_id = \(runId) AND query_index = \(shard.queryIndex) AND shard_start_ms = \(shard.start)
            """, logger: logger)
    }

    // MARK: What a run saw and changed

    /// Adds outcome counts by `TYPE/SUBTYPE`.
    public func count(runId: Int64, _ outcomes: [(typeAndSubtype: String, outcome: String)], on connection: PostgresConnection) async throws {
        struct Key: Hashable { var typeAndSubtype: String; var outcome: String }
        let counts = Dictionary(grouping: outcomes.map { Key(typeAndSubtype: $0.typeAndSubtype, outcome: $0.outcome) }) { $0 }
            .mapValues(\.count).sorted { ($0.key.typeAndSubtype, $0.key.outcome) < ($1.key.typeAndSubtype, $1.key.outcome) }
        guard !counts.isEmpty else { return }
        try await connection.query("""
            INSERT INTO run_counts (run_id, type_and_subtype, outcome, count)
            SELECT \(runId), * FROM unnest(\(counts.map(\.key.typeAndSubtype))::text[], \(counts.map(\.key.outcome))::text[],
                                         \(counts.map(\.value))::int[])
            ON CONFLICT (run_id, type_and_subtype, outcome) DO UPDATE SET count = run_counts.count + EXCLUDED.count
            """, logger: logger)
    }

    /// Records purchases that changed: the first `before` is kept, `after` is the latest.
    public func recordChanges(runId: Int64, _ changes: [PurchaseChange], on connection: PostgresConnection) async throws {
        // One row per purchase: its first state before and its last after.
        var byPurchase: [String: PurchaseChange] = [:]
        var order: [String] = []
        for change in changes where change.isChange {
            let id = change.after.originalTransactionId
            if let existing = byPurchase[id] {
                byPurchase[id] = PurchaseChange(before: existing.before, after: change.after)
            } else {
                byPurchase[id] = change
                order.append(id)
            }
        }
        let changed = order.map { byPurchase[$0]! }
        guard !changed.isEmpty else { return }
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let ids = changed.map(\.after.originalTransactionId)
        let befores = try changed.map { change in try change.before.map { String(decoding: try encoder.encode($0), as: UTF8.self) } ?? "" }
        let afters = try changed.map { String(decoding: try encoder.encode($0.after), as: UTF8.self) }
        try await connection.query("""
            INSERT INTO run_changes (run_id, original_transaction_id, before_state, after_state)
            SELECT \(runId), id, NULLIF(before, '')::jsonb, after::jsonb FROM unnest(\(ids)::text[], \(befores)::text[], \(afters)::text[]) AS c (id, before, after)
            ON CONFLICT (run_id, original_transaction_id) DO UPDATE SET after_state = EXCLUDED.after_state
            """, logger: logger)
    }

    public func recordRejections(runId: Int64, _ rejections: [Rejection], on connection: PostgresConnection) async throws {
        for rejection in rejections {
            try await connection.query("""
                INSERT INTO run_rejections (run_id, payload_sha256, phase, notification_uuid, reason, detail)
                VALUES (\(runId), \(rejection.payloadSHA256), \(rejection.phase), \(rejection.notificationUUID), \(rejection.reason), \(rejection.detail))
                ON CONFLICT (run_id, payload_sha256) DO NOTHING
                """, logger: logger)
        }
    }

    public func counts(runId: Int64) async throws -> [String: [String: Int]] {
        let rows = try await client.query(
            "SELECT type_and_subtype, outcome, count FROM run_counts WHERE run_id = \(runId)", logger: logger)
        var result: [String: [String: Int]] = [:]
        for try await (type, outcome, count) in rows.decode((String, String, Int).self) { result[type, default: [:]][outcome] = count }
        return result
    }

    public func changes(runId: Int64) async throws -> [PurchaseChange] {
        let rows = try await client.query("""
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

    public func rejections(runId: Int64) async throws -> [Rejection] {
        let rows = try await client.query("""
            SELECT phase, notification_uuid, reason, detail, payload_sha256 FROM run_rejections WHERE run_id = \(runId) ORDER BY recorded_at
            """, logger: logger)
        var result: [Rejection] = []
        for try await row in rows.decode((String, String?, String, String, String).self) {
            result.append(Rejection(phase: row.0, notificationUUID: row.1, reason: row.2, detail: row.3, payloadSHA256: row.4))
        }
        return result
    }

    static func sha256(_ text: String) -> String {
        SHA256.hash(data: Data(text.utf8)).map { String(format: "%02x", $0) }.joined()
    }
}
