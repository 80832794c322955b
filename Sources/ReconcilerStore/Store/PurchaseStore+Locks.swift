package import AppStoreServer
import Foundation
package import Logging
import PostgresNIO
package import ReconcilerDomain
package import ReconcilerShared

/// Locks on the purchases a transaction writes, and a dry run's copies of them.
extension PurchaseStore {
    /// Serialises all writers of the same purchases until the transaction ends, and in a dry run
    /// copies the purchases (with their transactions), the notifications and the customers
    /// (revision and purchases) into the shadow tables. Keys are locked in one sorted order, once
    /// per transaction, so two transactions locking overlapping sets cannot deadlock. Concurrent
    /// copies of one notification need no lock: the second insert waits for the first and finds it.
    ///
    /// The locks come before the transaction's first write: PostgreSQL gives a transaction its id
    /// (`xid`) at its first write, and the change feed is read in `xid` order, so a writer that
    /// waited for a purchase must get a later `xid` than the one it waited for, or the feed would
    /// show that purchase's changes out of order. A lock taken after a write is refused.
    ///
    /// With `purchasesByNotification` (a page of notifications, UUID → their purchase), only the
    /// purchases of notifications not recorded yet are locked: a duplicate writes nothing, so a
    /// page that an earlier query already recorded (the sweep after the priority queries) waits
    /// for no one. A notification another transaction records meanwhile is a duplicate of it here.
    package func lock(
        purchases originalTransactionIds: some Collection<String>, notifications notificationUUIDs: [String] = [],
        purchasesByNotification: [String: String] = [:], anchors: [String] = [], on transaction: DatabaseTransaction
    ) async throws {
        let keys =
            Set(originalTransactionIds).sorted().map { LockKey(original_transaction_id: $0) }
            + purchasesByNotification.keys.sorted().map { LockKey(original_transaction_id: purchasesByNotification[$0]!, notification_uuid: $0) }
        if !keys.isEmpty {
            // Purchases of different apps may share an id: the lock is on the app's purchase.
            let app = "\(try bundleId) \(try environment) "
            // The page's recorded notifications are looked up by key, once: `OR NOT EXISTS (…)`
            // was planned as a hash of every stored UUID (a scan of `notifications` per page) for
            // as long as the table looked small enough, tens of thousands of rows.
            let query = LockPurchasesSQL.query(app: app, keys: try Self.json(keys), notificationUUIDs: purchasesByNotification.keys.sorted())
            let rows = try await transaction.query(query, preparedAs: LockPurchasesSQL.self, logger: logger)
            var wroteBefore = false
            for try await row in rows where try !row.decode((String, Bool).self).1 { wroteBefore = true }
            if wroteBefore {
                throw ReconcilerError(
                    .lockOrder, "purchases locked after the transaction wrote: the change feed would misorder their changes")
            }
        }
        if let shadow {
            try await shadow.copyOnFirstTouch(
                purchases: Array(Set(originalTransactionIds).union(purchasesByNotification.values)), notifications: notificationUUIDs,
                anchors: anchors, of: try requiredTarget, on: transaction, logger: logger)
        }
    }

    /// A purchase to lock, unless the notification it comes with is recorded already.
    private struct LockKey: Encodable {
        var original_transaction_id: String
        var notification_uuid: String? = nil
    }
}

/// The live path's statements are prepared (``PreparedSQL``).
private enum LockPurchasesSQL: PreparedSQL {
    static func query(app: String, keys: String, notificationUUIDs: [String]) -> PostgresQuery {
        """
        SELECT pg_advisory_xact_lock(727002, k)::text, pg_current_xact_id_if_assigned() IS NULL
        FROM (
            SELECT DISTINCT hashtext(\(app) || key.original_transaction_id) AS k
            FROM jsonb_to_recordset(\(keys)::jsonb) AS key (original_transaction_id text, notification_uuid text)
            WHERE key.notification_uuid IS NULL
               OR NOT key.notification_uuid = ANY(ARRAY(
                   SELECT n.notification_uuid FROM notifications n
                   WHERE n.notification_uuid = ANY(\(notificationUUIDs)::text[])))
            ORDER BY 1
        ) AS sorted_keys
        """
    }

    static let sql = query(app: "", keys: "", notificationUUIDs: []).sql
    /// The app's prefix of a lock key, the keys as JSON, the page's notification UUIDs.
    static let bindingTypes: [PostgresDataType] = [.text, .text, .textArray]
}
