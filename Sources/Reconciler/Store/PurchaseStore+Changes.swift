import Foundation
import PostgresNIO
import ReconcilerShared

/// Reading the change feed. A row is returned only once no transaction that could still add a row
/// before it is running: rows come in the order of the transactions that wrote them (their `xid`,
/// then their id), and only those whose transaction is older than every transaction still running
/// (`pg_snapshot_xmin`). A consumer that stores the id of the last row it processed, and asks for
/// what follows it, therefore misses no row and gets none twice, with no lock on the writers.
extension PurchaseStore {
    /// One row of the change feed, as `reconciler changes` prints it.
    public struct FeedChange: Sendable, Codable, Hashable {
        public var changeId: Int64
        public var originalTransactionId: String
        public var appAccountToken: String?
        public var source: ChangeSource
        public var notificationUUID: String?
        public var runId: Int64?
        public var before: PurchaseState?
        public var after: PurchaseState
        public var changedAt: Date
    }

    /// The changes after `changeId` (0: from the start), at most `limit`, in feed order.
    public func changes(after changeId: Int64, limit: Int, on connection: PostgresConnection) async throws -> [FeedChange] {
        let rows = try await connection.query("""
            WITH cursor_ AS (SELECT COALESCE((SELECT xid FROM purchase_changes WHERE change_id = \(changeId)), '0'::xid8) AS xid)
            SELECT change_id, original_transaction_id, app_account_token, source, notification_uuid, run_id, before_state::text,
                   after_state::text, changed_at
            FROM purchase_changes, cursor_
            WHERE (purchase_changes.xid, change_id) > (cursor_.xid, \(changeId))
              AND purchase_changes.xid < pg_snapshot_xmin(pg_current_snapshot())
            ORDER BY purchase_changes.xid, change_id
            LIMIT \(limit)
            """, logger: logger)
        let decoder = JSONDecoder()
        var changes: [FeedChange] = []
        for try await row in rows.decode((Int64, String, String?, String, String?, Int64?, String?, String, Date).self) {
            changes.append(FeedChange(
                changeId: row.0, originalTransactionId: row.1, appAccountToken: row.2, source: ChangeSource(rawValue: row.3) ?? .webhook,
                notificationUUID: row.4, runId: row.5, before: try row.6.map { try decoder.decode(PurchaseState.self, from: Data($0.utf8)) },
                after: try decoder.decode(PurchaseState.self, from: Data(row.7.utf8)), changedAt: row.8))
        }
        return changes
    }

    /// Whether a change id is in the feed (a consumer resuming from a pruned id must start over).
    public func hasChange(_ changeId: Int64, on connection: PostgresConnection) async throws -> Bool {
        let rows = try await connection.query("SELECT 1 FROM purchase_changes WHERE change_id = \(changeId)", logger: logger)
        for try await _ in rows { return true }
        return false
    }

    /// Deletes the changes recorded before `time`; returns how many.
    public func pruneChanges(before time: Date, on connection: PostgresConnection) async throws -> Int {
        let rows = try await connection.query(
            "WITH gone AS (DELETE FROM purchase_changes WHERE changed_at < \(time) RETURNING 1) SELECT count(*) FROM gone", logger: logger)
        for try await count in rows.decode(Int.self) { return count }
        return 0
    }
}
