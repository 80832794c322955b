import Foundation
import PostgresNIO
import ReconcilerShared

/// Reading the change feed. A row is returned only once no transaction that could still add a row
/// before it is running: rows come in the order of the transactions that wrote them (their `xid`,
/// then their id), and only those whose transaction is older than every transaction still running
/// (`pg_snapshot_xmin`). A consumer that stores the id of the last row it processed, and asks for
/// what follows it, therefore misses no row and gets none twice, with no lock on the writers.
///
/// ```swift
/// var position = try await store.position(of: lastProcessedId, on: connection) ?? .start
/// let batch = try await store.changes(after: position, limit: 500, on: connection)
/// for change in batch.changes { process(change) }
/// position = batch.end
/// ```
extension PurchaseStore {
    /// One row of the change feed, as `reconciler changes` prints it: every key on every line
    /// (absent values `null`), `changedAt` in ISO 8601, `before` and `after` in the `export` shape
    /// with `entitled` as of the commit.
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

        public init(
            changeId: Int64, originalTransactionId: String, appAccountToken: String?, source: ChangeSource, notificationUUID: String?,
            runId: Int64?, before: PurchaseState?, after: PurchaseState, changedAt: Date
        ) {
            self.changeId = changeId
            self.originalTransactionId = originalTransactionId
            self.appAccountToken = appAccountToken
            self.source = source
            self.notificationUUID = notificationUUID
            self.runId = runId
            self.before = before
            self.after = after
            self.changedAt = changedAt
        }

        private enum CodingKeys: String, CodingKey {
            case changeId, originalTransactionId, appAccountToken, source, notificationUUID, runId, before, after, changedAt
        }

        private static let dateStyle = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            let changedAt = try container.decode(String.self, forKey: .changedAt)
            guard let date = try? Self.dateStyle.parse(changedAt) else {
                throw DecodingError.dataCorruptedError(forKey: .changedAt, in: container, debugDescription: "not an ISO 8601 date")
            }
            self.init(
                changeId: try container.decode(Int64.self, forKey: .changeId),
                originalTransactionId: try container.decode(String.self, forKey: .originalTransactionId),
                appAccountToken: try container.decodeIfPresent(String.self, forKey: .appAccountToken),
                source: try container.decode(ChangeSource.self, forKey: .source),
                notificationUUID: try container.decodeIfPresent(String.self, forKey: .notificationUUID),
                runId: try container.decodeIfPresent(Int64.self, forKey: .runId),
                before: try container.decodeIfPresent(PurchaseState.self, forKey: .before),
                after: try container.decode(PurchaseState.self, forKey: .after),
                changedAt: date)
        }

        /// Encodes every key, absent values as `null`, so each line has the same keys.
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(changeId, forKey: .changeId)
            try container.encode(originalTransactionId, forKey: .originalTransactionId)
            try container.encode(appAccountToken, forKey: .appAccountToken)
            try container.encode(source, forKey: .source)
            try container.encode(notificationUUID, forKey: .notificationUUID)
            try container.encode(runId, forKey: .runId)
            try container.encode(before, forKey: .before)
            try container.encode(after, forKey: .after)
            try container.encode(changedAt.formatted(Self.dateStyle), forKey: .changedAt)
        }

        /// One JSON line (keys sorted, no trailing newline).
        public func jsonLine() throws -> String {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            return String(decoding: try encoder.encode(self), as: UTF8.self)
        }
    }

    /// A place in the feed: a row's id and the transaction that wrote it. A reader keeps the
    /// position of the last row it read (not only the id), so it goes on even after that row is pruned.
    public struct FeedPosition: Sendable, Hashable, CustomStringConvertible {
        public let changeId: Int64
        /// The writing transaction's `xid8`, as text.
        let xid: String

        /// Before the first row.
        public static let start = FeedPosition(changeId: 0, xid: "0")

        public var description: String { "change \(changeId)" }
    }

    /// Rows read from the feed, and where the next read starts.
    public struct FeedBatch: Sendable {
        public var changes: [FeedChange]
        /// The position of the last row read (the position read after, when there was none).
        public var end: FeedPosition
    }

    /// The position of a change id, or `nil` when it is not in the feed (pruned, or never
    /// written); `0` is ``FeedPosition/start``.
    public func position(of changeId: Int64, on connection: PostgresConnection) async throws -> FeedPosition? {
        guard changeId != 0 else { return .start }
        let rows = try await connection.query("SELECT xid::text FROM purchase_changes WHERE change_id = \(changeId)", logger: logger)
        for try await xid in rows.decode(String.self) { return FeedPosition(changeId: changeId, xid: xid) }
        return nil
    }

    /// The position of the newest readable change (``FeedPosition/start`` when the feed is empty),
    /// where a new consumer that wants no history begins.
    public func newestPosition(on connection: PostgresConnection) async throws -> FeedPosition {
        let rows = try await connection.query(
            """
            SELECT c.change_id, c.xid::text AS xid_text FROM purchase_changes c
            WHERE c.xid < pg_snapshot_xmin(pg_current_snapshot())
            ORDER BY c.xid DESC, c.change_id DESC LIMIT 1
            """, logger: logger)
        for try await (id, xid) in rows.decode((Int64, String).self) { return FeedPosition(changeId: id, xid: xid) }
        return .start
    }

    /// The changes after `position`, at most `limit`, in feed order; with `appAccountToken`, only
    /// changes of purchases that belonged to that app user before or after the change (a purchase
    /// moved to another user shows in both users' feeds); with `runId`, only that run's changes.
    public func changes(
        after position: FeedPosition, limit: Int, appAccountToken: String? = nil, runId: Int64? = nil,
        on connection: PostgresConnection
    ) async throws -> FeedBatch {
        let rows = try await connection.query(
            """
            SELECT c.change_id, c.xid::text AS xid_text, c.original_transaction_id, c.app_account_token, c.source, c.notification_uuid,
                   c.run_id, c.before_state::text, c.after_state::text, c.changed_at
            FROM purchase_changes c
            WHERE (c.xid, c.change_id) > (\(position.xid)::xid8, \(position.changeId))
              AND c.xid < pg_snapshot_xmin(pg_current_snapshot())
              AND (\(appAccountToken)::text IS NULL OR c.app_account_token = \(appAccountToken)
                   OR c.before_state->>'appAccountToken' = \(appAccountToken))
              AND (\(runId)::bigint IS NULL OR c.run_id = \(runId))
            -- The column, not the text above: ORDER BY a bare name takes an output column first, and
            -- text sorts '1000' before '999'.
            ORDER BY c.xid, c.change_id
            LIMIT \(limit)
            """, logger: logger)
        let decoder = JSONDecoder()
        var batch = FeedBatch(changes: [], end: position)
        for try await row in rows.decode((Int64, String, String, String?, String, String?, Int64?, String?, String, Date).self) {
            guard let source = ChangeSource(rawValue: row.4) else {
                throw PurchaseStoreError(description: "change \(row.0) has an unknown source \(row.4)")
            }
            batch.changes.append(
                FeedChange(
                    changeId: row.0, originalTransactionId: row.2, appAccountToken: row.3, source: source, notificationUUID: row.5, runId: row.6,
                    before: try row.7.map { try decoder.decode(PurchaseState.self, from: Data($0.utf8)) },
                    after: try decoder.decode(PurchaseState.self, from: Data(row.8.utf8)), changedAt: row.9))
            batch.end = FeedPosition(changeId: row.0, xid: row.1)
        }
        return batch
    }

    /// Deletes up to `limit` changes recorded before `time`, from the oldest in feed order; returns
    /// how many (call again until it returns less than `limit`).
    ///
    /// Only a prefix of the feed goes: rows up to the first one recorded at or after `time` (so a
    /// consumer whose last row is kept can never find a gap after it), never a row a running
    /// transaction could still put a row before, and never the newest row (so a consumer that is
    /// caught up can resume after a quiet spell longer than the retention).
    public func pruneChanges(before time: Date, limit: Int = 10_000, on connection: PostgresConnection) async throws -> Int {
        let rows = try await connection.query(
            """
            WITH horizon AS (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS xmin),
            kept AS (
                (SELECT c.xid, c.change_id FROM purchase_changes c, horizon
                 WHERE c.xid < horizon.xmin AND c.changed_at >= \(time) ORDER BY c.xid, c.change_id LIMIT 1)
                UNION ALL
                (SELECT c.xid, c.change_id FROM purchase_changes c, horizon
                 WHERE c.xid < horizon.xmin ORDER BY c.xid DESC, c.change_id DESC LIMIT 1)
            ),
            first_kept AS (SELECT xid, change_id FROM kept ORDER BY xid, change_id LIMIT 1),
            doomed AS (
                SELECT c.change_id FROM purchase_changes c, first_kept k
                WHERE (c.xid, c.change_id) < (k.xid, k.change_id) AND c.changed_at < \(time)
                ORDER BY c.xid, c.change_id LIMIT \(limit)
            ),
            gone AS (DELETE FROM purchase_changes WHERE change_id IN (SELECT change_id FROM doomed) RETURNING 1)
            SELECT count(*) FROM gone
            """, logger: logger)
        for try await count in rows.decode(Int.self) { return count }
        return 0
    }
}
