import AppStoreServer
import Foundation
import PostgresNIO
package import ReconcilerDomain

/// The replay's shards and their checkpoints.
extension RunLedger {
    package func shards(runId: Int64) async throws -> [ShardRecord] {
        try await read { [logger] transaction in
            let rows = try await transaction.query(
                """
                SELECT query_index, notification_type, subtype, shard_start_ms, shard_end_ms, pagination_token, pages_done,
                       notifications_seen, restarts, status, failure_kind, last_error
                FROM run_shards WHERE run_id = \(runId) ORDER BY query_index, shard_start_ms
                """, logger: logger)
            var shards: [ShardRecord] = []
            for try await row in rows {
                let columns = NamedColumns(row)
                let type: String? = try columns["notification_type"]
                let subtype: String? = try columns["subtype"]
                shards.append(
                    ShardRecord(
                        shard: .init(
                            queryIndex: try columns["query_index"],
                            filter: .init(type.map(NotificationTypeV2.init(rawValue:)), subtype.map(Subtype.init(rawValue:))),
                            start: try columns["shard_start_ms"], end: try columns["shard_end_ms"]),
                        paginationToken: try columns["pagination_token"], pagesDone: try columns["pages_done"],
                        notificationsSeen: try columns["notifications_seen"], restarts: try columns["restarts"],
                        status: try columns.stored("status", of: "run_shards"),
                        failureKind: try columns.storedIfPresent("failure_kind", of: "run_shards"),
                        lastError: try columns["last_error"]))
            }
            return shards
        }
    }

    /// A page's checkpoint: where the shard continues, and whether it is finished. It advances
    /// only from the position the page was fetched from, so two processes can never both apply
    /// the shard's pages; throws ``alreadyCommitted`` or ``checkpointMoved`` when it is not there.
    package func checkpoint(
        runId: Int64, shard: ReplayPlanner.Shard, from position: ShardRecord.Position, nextToken: String?, done: Bool,
        notificationsSeen: Int, on transaction: DatabaseTransaction
    ) async throws {
        let rows = try await transaction.query(
            """
            UPDATE run_shards SET pagination_token = \(nextToken), pages_done = pages_done + 1,
                notifications_seen = notifications_seen + \(notificationsSeen), status = \(done ? "done" : "pending"), last_error = NULL,
                consecutive_failures = 0
            WHERE run_id = \(runId) AND query_index = \(shard.queryIndex) AND shard_start_ms = \(shard.start) AND shard_end_ms = \(shard.end)
              AND pagination_token IS NOT DISTINCT FROM \(position.paginationToken) AND pages_done = \(position.pagesDone)
            RETURNING 1
            """, logger: logger)
        var advanced = false
        for try await _ in rows { advanced = true }
        guard !advanced else { return }
        let check = try await transaction.query(
            """
            SELECT 1 FROM run_shards
            WHERE run_id = \(runId) AND query_index = \(shard.queryIndex) AND shard_start_ms = \(shard.start) AND shard_end_ms = \(shard.end)
              AND pagination_token IS NOT DISTINCT FROM \(nextToken) AND pages_done = \(position.pagesDone + 1)
            """, logger: logger)
        var committed = false
        for try await _ in check { committed = true }
        throw committed ? Self.alreadyCommitted : Self.checkpointMoved
    }

    /// Splits a shard in the transaction of the page that showed it dense: the shard is done at
    /// `cut` (the checkpoint advances from `position`, compare-and-set as for any page; `split_at_ms`
    /// records the cut, and the first piece starts ``ReplayPlanner/splitMargin`` before it), and the
    /// pieces of the rest of its range become shards of their own. A piece with the query and range
    /// of an existing shard is that shard already.
    package func split(
        runId: Int64, shard: ReplayPlanner.Shard, from position: ShardRecord.Position, at cut: Int64, into pieces: [ReplayPlanner.Shard],
        notificationsSeen: Int, on transaction: DatabaseTransaction
    ) async throws {
        try await checkpoint(
            runId: runId, shard: shard, from: position, nextToken: nil, done: true, notificationsSeen: notificationsSeen,
            on: transaction)
        let rows = try PurchaseStore.json(pieces.map(ShardColumns.init))
        try await transaction.query(
            """
            UPDATE run_shards SET split_at_ms = \(cut)
            WHERE run_id = \(runId) AND query_index = \(shard.queryIndex) AND shard_start_ms = \(shard.start) AND shard_end_ms = \(shard.end)
            """, logger: logger)
        try await transaction.query(
            """
            INSERT INTO run_shards (run_id, query_index, notification_type, subtype, shard_start_ms, shard_end_ms, split_from_ms)
            SELECT \(runId), query_index, notification_type, subtype, shard_start_ms, shard_end_ms, \(shard.start)
            FROM jsonb_populate_recordset(NULL::run_shards, \(rows)::jsonb)
            ON CONFLICT DO NOTHING
            """, logger: logger)
    }

    /// Gives up the start of a shard Apple no longer serves (4000012): the shard is done at the
    /// piece's start (compare-and-set from `position`), the piece replays the rest, and the slice
    /// before it is recorded as given up, lost, all in one transaction.
    package func moveShardStart(
        runId: Int64, shard: ReplayPlanner.Shard, from position: ShardRecord.Position, to rest: ReplayPlanner.Shard?, lostReason: String
    ) async throws {
        let cut = rest?.start ?? shard.end
        let lostSlice = ReplayPlanner.Shard(queryIndex: shard.queryIndex, filter: shard.filter, start: shard.start, end: cut)
        try await read { transaction in
            try await split(runId: runId, shard: shard, from: position, at: cut, into: rest.map { [$0] } ?? [], notificationsSeen: 0, on: transaction)
            try await recordGivenUp(
                runId: runId, kind: .shard, subject: Self.subject(of: lostSlice), failureKind: .permanent, reason: lostReason, failures: 1,
                on: transaction)
        }
    }

    /// Starts a shard over after its pagination token expired; returns the new position.
    package func restartShard(runId: Int64, shard: ReplayPlanner.Shard, from position: ShardRecord.Position) async throws -> ShardRecord.Position {
        try await read { [logger] transaction in
            let rows = try await transaction.query(
                """
                UPDATE run_shards SET pagination_token = NULL, restarts = restarts + 1
                WHERE run_id = \(runId) AND query_index = \(shard.queryIndex) AND shard_start_ms = \(shard.start) AND shard_end_ms = \(shard.end)
                  AND pagination_token IS NOT DISTINCT FROM \(position.paginationToken) AND pages_done = \(position.pagesDone)
                RETURNING pages_done
                """, logger: logger)
            for try await pages in rows.decode(Int.self) { return ShardRecord.Position(paginationToken: nil, pagesDone: pages) }
            throw Self.checkpointMoved
        }
    }

    /// Marks a shard as failed: the next attempt of the run retries it, unless the policy gives
    /// it up (Apple refused it, or it failed in too many attempts in a row); a given-up shard is
    /// recorded in `given_up` in the same transaction.
    @discardableResult
    package func failShard(
        runId: Int64, shard: ReplayPlanner.Shard, kind: FailureKind, error: String, policy: GiveUpPolicy = .init()
    ) async throws -> FailureOutcome? {
        try await read { [logger] transaction in
            let rows = try await transaction.query(
                """
                UPDATE run_shards SET consecutive_failures = consecutive_failures + 1,
                    status = CASE WHEN \(kind.rawValue) = 'retryable' AND consecutive_failures + 1 >= \(policy.attempts) THEN 'given_up'
                                  ELSE 'failed' END,
                    failure_kind = \(kind.rawValue), last_error = \(error)
                WHERE run_id = \(runId) AND query_index = \(shard.queryIndex) AND shard_start_ms = \(shard.start) AND shard_end_ms = \(shard.end)
                RETURNING consecutive_failures
                """, logger: logger)
            var failures: Int?
            for try await count in rows.decode(Int.self) { failures = count }
            guard let failures else { return nil }
            guard policy.givesUp(kind, consecutiveFailures: failures) else { return .failed(consecutiveFailures: failures) }
            try await self.recordGivenUp(
                runId: runId, kind: .shard, subject: Self.subject(of: shard), failureKind: kind, reason: error, failures: failures,
                on: transaction)
            return .givenUp(consecutiveFailures: failures)
        }
    }

}

extension Array where Element == ShardRecord {
    /// History pages the shards fetched so far.
    package var pagesDone: Int { reduce(0) { $0 + $1.pagesDone } }
}

/// A shard as the columns of `run_shards` that name it, for `jsonb_populate_recordset`.
struct ShardColumns: Encodable {
    var query_index: Int
    var notification_type: String?
    var subtype: String?
    var shard_start_ms: Int64
    var shard_end_ms: Int64

    init(_ shard: ReplayPlanner.Shard) {
        query_index = shard.queryIndex
        notification_type = shard.filter.notificationType?.rawValue
        subtype = shard.filter.notificationSubtype?.rawValue
        shard_start_ms = shard.start
        shard_end_ms = shard.end
    }
}

extension RunLedger {
    /// A checkpoint that did not advance because the shard is exactly where this page would have
    /// put it: the page committed before (its commit's answer was lost), so this attempt changes nothing.
    static let alreadyCommitted = ReconcilerError(.checkpointAlreadyCommitted, "the page was already committed")
    /// A checkpoint that did not advance: the shard is not where this process read it.
    static let checkpointMoved = ReconcilerError(
        .checkpointConflict, "another process moved the shard's checkpoint: this process no longer owns the run")
}
