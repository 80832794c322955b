package import AppStoreServer
package import Foundation
import PostgresNIO
import ReconcilerDomain
package import ReconcilerShared

/// Reading the change feed. A row is returned only once no transaction that could still add a row
/// before it is running: rows come in the order of the transactions that wrote them (their `xid`,
/// then their id), and only those whose transaction is older than every transaction still running
/// (`pg_snapshot_xmin`). A consumer that stores the id of the last row it processed, and asks for
/// what follows it, therefore misses no row and gets none twice, with no lock on the writers.
///
/// ```swift
/// var position = try await store.position(of: lastProcessedId, on: transaction) ?? .start
/// let batch = try await store.changes(after: position, limit: 500, on: transaction)
/// for change in batch.changes { process(change) }
/// position = batch.end
/// ```
extension PurchaseStore {
    /// What a row of the change feed is about (`purchase_changes.kind`).
    package enum FeedKind: String, Sendable, Codable, CaseIterable {
        /// A purchase's state changed (`before` → `after`).
        case purchase
        /// A notification recorded for the first time that changed no purchase (or that Apple set a
        /// deadline for): its type, subtype and deadline, no `before`/`after`.
        case notification
    }

    /// One row of the change feed, as `reconciler changes` prints it: every key on every line
    /// (absent values `null`: `before`/`after` on notification rows, the notification's fields on
    /// purchase rows but the type and subtype of the notification that caused the change),
    /// `changedAt` in ISO 8601, `before` and `after` in the `export` shape with `entitled` as of
    /// the commit, and the app and environment.
    package struct FeedChange: Sendable, Codable, Hashable {
        package var changeId: Int64
        package var kind: FeedKind
        /// The purchase; `nil` on a notification row about no purchase (a summary, a token, TEST).
        package var originalTransactionId: String?
        /// The purchase's app (its bundle id); `nil` only in a line written before apps were named.
        package var bundleId: String?
        /// The purchase's environment, `Production` or `Sandbox`.
        package var environment: AppStoreEnvironment?
        package var appAccountToken: String?
        package var source: ChangeSource
        package var notificationUUID: String?
        package var runId: Int64?
        package var before: PurchaseState?
        /// The purchase after the change; `nil` on notification rows.
        package var after: PurchaseState?
        package var changedAt: Date
        /// A notification row's notification: `TYPE`, its subtype, its transaction, when Apple
        /// signed it and, where Apple sets one, the deadline for an answer (UNIX ms). A purchase
        /// row caused by a notification (source `webhook` or `history`) carries its type and subtype.
        package var notificationType: String?
        package var subtype: String?
        package var transactionId: String?
        package var signedDate: Int64?
        package var respondBy: Int64?
        /// The app's own ID for the purchase's customer (``PurchaseState/appUserId``) after the
        /// change, else before it; on a notification row, its purchase's; `null` when unknown.
        package var appUserId: String?

        package init(
            changeId: Int64, kind: FeedKind = .purchase, originalTransactionId: String?, bundleId: String? = nil,
            environment: AppStoreEnvironment? = nil,
            appAccountToken: String?, source: ChangeSource, notificationUUID: String?, runId: Int64?, before: PurchaseState?, after: PurchaseState?,
            changedAt: Date, notificationType: String? = nil, subtype: String? = nil, transactionId: String? = nil, signedDate: Int64? = nil,
            respondBy: Int64? = nil, appUserId: String? = nil
        ) {
            self.changeId = changeId
            self.kind = kind
            self.originalTransactionId = originalTransactionId
            self.bundleId = bundleId ?? after?.bundleId
            self.environment = environment ?? after?.environment
            self.appAccountToken = appAccountToken
            self.source = source
            self.notificationUUID = notificationUUID
            self.runId = runId
            self.before = before
            self.after = after
            self.changedAt = changedAt
            self.notificationType = notificationType
            self.subtype = subtype
            self.transactionId = transactionId
            self.signedDate = signedDate
            self.respondBy = respondBy
            self.appUserId = appUserId ?? after?.appUserId ?? before?.appUserId
        }

        private enum CodingKeys: String, CodingKey {
            case changeId, kind, originalTransactionId, bundleId, environment, appAccountToken, source, notificationUUID, runId, before, after,
                changedAt, notificationType, subtype, transactionId, signedDate, respondBy, appUserId
        }

        private static let dateStyle = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

        package init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            let changedAt = try container.decode(String.self, forKey: .changedAt)
            guard let date = try? Self.dateStyle.parse(changedAt) else {
                throw DecodingError.dataCorruptedError(forKey: .changedAt, in: container, debugDescription: "not an ISO 8601 date")
            }
            self.init(
                changeId: try container.decode(Int64.self, forKey: .changeId),
                // Lines printed before notification rows existed are purchase rows.
                kind: try container.decodeIfPresent(FeedKind.self, forKey: .kind) ?? .purchase,
                originalTransactionId: try container.decodeIfPresent(String.self, forKey: .originalTransactionId),
                bundleId: try container.decodeIfPresent(String.self, forKey: .bundleId),
                environment: try container.decodeIfPresent(AppStoreEnvironment.self, forKey: .environment),
                appAccountToken: try container.decodeIfPresent(String.self, forKey: .appAccountToken),
                source: try container.decode(ChangeSource.self, forKey: .source),
                notificationUUID: try container.decodeIfPresent(String.self, forKey: .notificationUUID),
                runId: try container.decodeIfPresent(Int64.self, forKey: .runId),
                before: try container.decodeIfPresent(PurchaseState.self, forKey: .before),
                after: try container.decodeIfPresent(PurchaseState.self, forKey: .after),
                changedAt: date,
                notificationType: try container.decodeIfPresent(String.self, forKey: .notificationType),
                subtype: try container.decodeIfPresent(String.self, forKey: .subtype),
                transactionId: try container.decodeIfPresent(String.self, forKey: .transactionId),
                signedDate: try container.decodeIfPresent(Int64.self, forKey: .signedDate),
                respondBy: try container.decodeIfPresent(Int64.self, forKey: .respondBy),
                appUserId: try container.decodeIfPresent(String.self, forKey: .appUserId))
        }

        /// Encodes every key, absent values as `null`, so each line has the same keys whatever its kind.
        package func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(changeId, forKey: .changeId)
            try container.encode(kind, forKey: .kind)
            try container.encode(originalTransactionId, forKey: .originalTransactionId)
            try container.encode(bundleId, forKey: .bundleId)
            try container.encode(environment, forKey: .environment)
            try container.encode(appAccountToken, forKey: .appAccountToken)
            try container.encode(source, forKey: .source)
            try container.encode(notificationUUID, forKey: .notificationUUID)
            try container.encode(runId, forKey: .runId)
            try container.encode(before, forKey: .before)
            try container.encode(after, forKey: .after)
            try container.encode(changedAt.formatted(Self.dateStyle), forKey: .changedAt)
            try container.encode(notificationType, forKey: .notificationType)
            try container.encode(subtype, forKey: .subtype)
            try container.encode(transactionId, forKey: .transactionId)
            try container.encode(signedDate, forKey: .signedDate)
            try container.encode(respondBy, forKey: .respondBy)
            try container.encode(appUserId, forKey: .appUserId)
        }

        /// One JSON line (keys sorted, no trailing newline).
        package func jsonLine() throws -> String {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            return String(decoding: try encoder.encode(self), as: UTF8.self)
        }
    }

    /// A place in the feed: a row's id and the transaction that wrote it. A reader keeps the
    /// position of the last row read (not only the id), so it goes on even after that row is pruned.
    /// Positions compare in feed order.
    package struct FeedPosition: Sendable, Hashable, Comparable, CustomStringConvertible {
        package let changeId: Int64
        /// The writing transaction's `xid8`, as text.
        let xid: String

        /// Before the first row.
        package static let start = FeedPosition(changeId: 0, xid: "0")

        package var description: String { "change \(changeId)" }

        package static func < (left: FeedPosition, right: FeedPosition) -> Bool {
            let (a, b) = (UInt64(left.xid) ?? 0, UInt64(right.xid) ?? 0)
            return a != b ? a < b : left.changeId < right.changeId
        }
    }

    /// Rows read from the feed, and where the next read starts.
    package struct FeedBatch: Sendable {
        package var changes: [FeedChange]
        /// The position of the last row read (the position read after, when there was none).
        package var end: FeedPosition
        /// Whether rows after the position read after had been pruned when the batch was read
        /// (seen in the same snapshot as the rows): a reader at that position missed them.
        package var missedPrunedRows: Bool
    }

    /// The position of a change id, or `nil` when it is not in the feed (pruned, or never
    /// written); `0` is ``FeedPosition/start``.
    package func position(of changeId: Int64, on transaction: DatabaseTransaction) async throws -> FeedPosition? {
        guard changeId != 0 else { return .start }
        let rows = try await transaction.query("SELECT xid::text FROM purchase_changes WHERE change_id = \(changeId)", logger: logger)
        for try await xid in rows.decode(String.self) { return FeedPosition(changeId: changeId, xid: xid) }
        return nil
    }

    /// The position of the newest readable change (``FeedPosition/start`` when the feed is empty),
    /// where a new consumer that wants no history begins.
    package func newestPosition(on transaction: DatabaseTransaction) async throws -> FeedPosition {
        let rows = try await transaction.query(
            """
            SELECT c.change_id, c.xid::text AS xid_text FROM purchase_changes c
            WHERE c.xid < pg_snapshot_xmin(pg_current_snapshot())
            ORDER BY c.xid DESC, c.change_id DESC LIMIT 1
            """, logger: logger)
        for try await (id, xid) in rows.decode((Int64, String).self) { return FeedPosition(changeId: id, xid: xid) }
        return .start
    }

    /// The changes after `position`, at most `limit`, in feed order; with `apps`, only changes of
    /// purchases of those apps and environments; with `appAccountToken`, only changes of purchases
    /// that belonged to that app user before or after the change (a purchase moved to another user
    /// shows in both users' feeds); with `runId`, only that run's changes.
    ///
    /// One statement, so one snapshot, also says how far the feed was pruned then (the last row
    /// deleted, kept in `purchase_changes_pruned`): past `position`, rows this reader never read
    /// are gone (``FeedBatch/missedPrunedRows``). When fewer than `limit` match, the batch ends at
    /// the newest row the statement could read, matching or not: everything up to it was looked
    /// at, so a filtered reader moves on with the feed, and a prune behind it is no gap for it.
    package func changes(
        after position: FeedPosition, limit: Int, apps: [AppTarget]? = nil, appAccountToken: String? = nil, runId: Int64? = nil,
        kind: FeedKind? = nil, appUserId: String? = nil, on transaction: DatabaseTransaction
    ) async throws -> FeedBatch {
        let scope = try Self.scope(apps)
        let rows = try await transaction.query(
            """
            (SELECT 'change' AS row_kind, c.change_id, c.xid::text AS xid_text, c.original_transaction_id, c.app_account_token, c.source,
                    c.notification_uuid, c.run_id, c.before_state::text, c.after_state::text, c.changed_at, c.bundle_id, c.environment,
                    c.kind, c.notification_type, c.subtype, c.transaction_id, c.signed_date_ms, c.respond_by_ms, c.app_user_id
             FROM purchase_changes c
             WHERE (c.xid, c.change_id) > (\(position.xid)::xid8, \(position.changeId))
               AND c.xid < pg_snapshot_xmin(pg_current_snapshot())
               AND (\(scope)::jsonb IS NULL OR EXISTS (
                    SELECT 1 FROM jsonb_to_recordset(\(scope)::jsonb) AS s (bundle_id text, environment text)
                    WHERE s.bundle_id = c.bundle_id AND s.environment = c.environment))
               AND (\(appAccountToken)::text IS NULL OR c.app_account_token = \(appAccountToken)
                    OR c.before_state->>'appAccountToken' = \(appAccountToken))
               AND (\(runId)::bigint IS NULL OR c.run_id = \(runId))
               AND (\(appUserId)::text IS NULL OR c.app_user_id = \(appUserId) OR c.before_state->>'appUserId' = \(appUserId))
               AND (\(kind?.rawValue)::text IS NULL OR c.kind = \(kind?.rawValue))
             -- The column, not the text above: ORDER BY a bare name takes an output column first, and
             -- text sorts '1000' before '999'.
             ORDER BY c.xid, c.change_id
             LIMIT \(limit))
            UNION ALL
            (SELECT 'scanned', c.change_id, c.xid::text, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                    NULL, NULL, NULL, NULL, NULL, NULL, NULL
             FROM purchase_changes c
             WHERE (c.xid, c.change_id) > (\(position.xid)::xid8, \(position.changeId))
               AND c.xid < pg_snapshot_xmin(pg_current_snapshot())
             ORDER BY c.xid DESC, c.change_id DESC
             LIMIT 1)
            UNION ALL
            SELECT 'pruned', p.change_id, p.xid::text, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                NULL, NULL
            FROM purchase_changes_pruned p
            """, logger: logger)
        let decoder = JSONDecoder()
        var batch = FeedBatch(changes: [], end: position, missedPrunedRows: false)
        var scannedTo: FeedPosition?
        var positions: [Int64: FeedPosition] = [:]
        for try await row in rows {
            let columns = NamedColumns(row)
            let rowPosition = FeedPosition(changeId: try columns["change_id"], xid: try columns["xid_text"])
            switch try columns["row_kind"] as String {
            case "scanned":
                scannedTo = rowPosition
                continue
            case "pruned":
                batch.missedPrunedRows = rowPosition > position
                continue
            default: break
            }
            let changeId = rowPosition.changeId
            guard let sourceName: String = try columns["source"], let changedAt: Date = try columns["changed_at"] else {
                throw ReconcilerError(.missingRow, "change \(changeId) was read without its columns")
            }
            let kind: FeedKind = try columns.stored("kind", of: "purchase_changes")
            let after: String? = try columns["after_state"]
            if kind == .purchase, after == nil {
                throw ReconcilerError(.missingRow, "change \(changeId) was read without its purchase's state")
            }
            let before: String? = try columns["before_state"]
            batch.changes.append(
                FeedChange(
                    changeId: changeId, kind: kind, originalTransactionId: try columns["original_transaction_id"], bundleId: try columns["bundle_id"],
                    environment: try columns["environment"], appAccountToken: try columns["app_account_token"],
                    source: try ReconcilerError.stored(sourceName, in: "purchase_changes.source", as: ChangeSource.self),
                    notificationUUID: try columns["notification_uuid"], runId: try columns["run_id"],
                    before: try before.map { try decoder.decode(PurchaseState.self, from: Data($0.utf8)) },
                    after: try after.map { try decoder.decode(PurchaseState.self, from: Data($0.utf8)) }, changedAt: changedAt,
                    notificationType: try columns["notification_type"], subtype: try columns["subtype"], transactionId: try columns["transaction_id"],
                    signedDate: try columns["signed_date_ms"], respondBy: try columns["respond_by_ms"], appUserId: try columns["app_user_id"]))
            positions[changeId] = rowPosition
        }
        batch.changes.sort { positions[$0.changeId]! < positions[$1.changeId]! }
        if let last = batch.changes.last { batch.end = positions[last.changeId]! }
        if batch.changes.count < limit, let scannedTo, scannedTo > batch.end { batch.end = scannedTo }
        return batch
    }

    /// Deletes up to `limit` changes recorded before `time`, from the oldest in feed order, and
    /// moves the pruned horizon (`purchase_changes_pruned`, see ``FeedBatch/missedPrunedRows``)
    /// past them; returns how many (call again until it returns less than `limit`). With `dryRun`
    /// it deletes nothing and returns how many it would delete, by the same statement.
    ///
    /// Only a prefix of the feed goes: rows up to the first one recorded at or after `time` (so a
    /// consumer whose last row is kept can never find a gap after it), never a row a running
    /// transaction could still put a row before, and never the newest row (so a consumer that is
    /// caught up can resume after a quiet spell longer than the retention).
    func pruneChanges(before time: Date, limit: Int? = 10_000, dryRun: Bool = false, on transaction: DatabaseTransaction) async throws -> Int {
        let rows = try await transaction.query(
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
            gone AS (
                DELETE FROM purchase_changes WHERE NOT \(dryRun) AND change_id IN (SELECT change_id FROM doomed) RETURNING xid, change_id
            ),
            last_gone AS (SELECT xid, change_id FROM gone ORDER BY xid DESC, change_id DESC LIMIT 1),
            moved AS (
                UPDATE purchase_changes_pruned p SET xid = l.xid, change_id = l.change_id FROM last_gone l
                WHERE (l.xid, l.change_id) > (p.xid, p.change_id) RETURNING 1
            )
            SELECT CASE WHEN \(dryRun) THEN (SELECT count(*) FROM doomed) ELSE (SELECT count(*) FROM gone) END
            """, logger: logger)
        for try await count in rows.decode(Int.self) { return count }
        return 0
    }
}
