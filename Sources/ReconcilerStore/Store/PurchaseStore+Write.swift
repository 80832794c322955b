package import AppStoreServer
import Foundation
package import Logging
import PostgresNIO
package import ReconcilerDomain
package import ReconcilerShared

/// The one write path (live notifications, replays, gap fill) and its rows in the change feed.
extension PurchaseStore {
    /// What made a change, for the change feed.
    package enum ChangeSource: String, Sendable, Codable {
        /// The live webhook.
        case webhook
        /// A notification a run replayed from Get Notification History.
        case history
        /// Get Transaction History (phase 2).
        case transactionHistory = "transaction_history"
        /// Get All Subscription Statuses.
        case statusRefresh = "status_refresh"
        /// A moment passed that ended the purchase's entitlement (``PurchaseStore/recordTimeFlips(since:until:limit:on:)``):
        /// only `entitled` differs between `before` and `after`.
        case time
        /// A signed transaction the app handed over (the app API's `POST /v1/transactions`).
        case app
    }

    /// Where a write comes from: its source, its run, and per purchase (by originalTransactionId)
    /// the notification behind it.
    package struct ChangeOrigin: Sendable {
        package var source: ChangeSource
        package var runId: Int64?
        package var notifications: [String: Cause] = [:]

        package init(source: ChangeSource, runId: Int64? = nil, notifications: [String: Cause] = [:]) {
            self.source = source
            self.runId = runId
            self.notifications = notifications
        }

        /// The notification that caused a purchase's change: its feed row names it and carries its
        /// type and subtype, so a consumer can react to the event (a refund, a renewal).
        package struct Cause: Sendable, Hashable {
            package var notificationUUID: String
            package var notificationType: String
            package var subtype: String?

            package init(notificationUUID: String, notificationType: String, subtype: String?) {
                self.notificationUUID = notificationUUID
                self.notificationType = notificationType
                self.subtype = subtype
            }
        }
    }

    /// Writes verified signed data (the caller holds the purchases' locks) and returns each
    /// purchase's state before and after. The one write path for live notifications, replays and
    /// gap fill; it takes only ``Verified`` values, which only the verifier makes. Every purchase
    /// that changed (``PurchaseChange/changesPurchase``: `entitled` and `lastSignedDate` aside) gets
    /// a row in the change feed in this same transaction, and listeners are told when it commits.
    /// `events`, given the changes, names the notifications that get feed rows of their own
    /// (``NotificationFeedRow``), written after the purchases' rows by the same statement.
    package func write(
        transactions: [TransactionWrite], updates: [PurchaseUpdate], before: [String: PurchaseState], origin: ChangeOrigin,
        events: ([String: PurchaseChange]) -> [NotificationFeedRow] = { _ in [] }, on transaction: DatabaseTransaction
    ) async throws -> [String: PurchaseChange] {
        try await upsertTransactions(transactions, on: transaction)
        let after = try await refreshPurchases(updates, on: transaction)
        let changes = after.mapValues { PurchaseChange(before: before[$0.originalTransactionId], after: $0) }
        try await recordInFeed(changes.values.filter(\.changesPurchase), events: events(changes), origin: origin, on: transaction)
        return changes
    }

    /// A notification recorded for the first time that gets a feed row of its own (kind
    /// `notification`): it changed no purchase, or Apple set a deadline for it.
    package struct NotificationFeedRow: Sendable {
        package var notificationUUID: String
        package var notificationType: String
        package var subtype: String?
        package var originalTransactionId: String?
        package var transactionId: String?
        package var appAccountToken: String?
        package var signedDate: Int64
        package var respondBy: Timestamp?

        package init(
            notificationUUID: String, notificationType: String, subtype: String?, originalTransactionId: String?, transactionId: String?,
            appAccountToken: String?, signedDate: Int64, respondBy: Timestamp?
        ) {
            self.notificationUUID = notificationUUID
            self.notificationType = notificationType
            self.subtype = subtype
            self.originalTransactionId = originalTransactionId
            self.transactionId = transactionId
            self.appAccountToken = appAccountToken
            self.signedDate = signedDate
            self.respondBy = respondBy
        }
    }

    /// The channel listeners of the change feed wait on.
    package static let changeChannel = "reconciler_changes"

    /// One row of `purchase_changes`: a purchase's change (`before_state`, `after_state`) or a
    /// notification's event (its type, subtype and deadline); the keys are the columns.
    private struct FeedRow: Encodable {
        var original_transaction_id: String?
        var bundle_id: String
        var environment: String
        var app_account_token: String?
        var source: String
        var notification_uuid: String?
        var run_id: Int64?
        var kind: String
        var before_state: PurchaseState?
        var after_state: PurchaseState?
        var notification_type: String?
        var subtype: String?
        var transaction_id: String?
        var signed_date_ms: Int64?
        var respond_by_ms: Int64?
        var app_user_id: String?
    }

    /// Writes the purchases' changes (by originalTransactionId), then the notifications' events in
    /// the order given, in one statement of the caller's transaction (after the purchases' locks, as
    /// every write); listeners are told when it commits (a dry run's changes are its own).
    func recordInFeed(
        _ changes: [PurchaseChange], events: [NotificationFeedRow], origin: ChangeOrigin, on transaction: DatabaseTransaction
    ) async throws {
        guard !changes.isEmpty || !events.isEmpty else { return }
        let target = try requiredTarget
        let changeRows = changes.sorted { $0.after.originalTransactionId < $1.after.originalTransactionId }.map {
            let cause = origin.notifications[$0.after.originalTransactionId]
            return FeedRow(
                original_transaction_id: $0.after.originalTransactionId, bundle_id: target.bundleId, environment: target.environment.rawValue,
                app_account_token: $0.after.appAccountToken ?? $0.before?.appAccountToken, source: origin.source.rawValue,
                notification_uuid: cause?.notificationUUID, run_id: origin.runId, kind: FeedKind.purchase.rawValue, before_state: $0.before,
                after_state: $0.after, notification_type: cause?.notificationType, subtype: cause?.subtype,
                app_user_id: $0.after.appUserId ?? $0.before?.appUserId)
        }
        let eventRows = events.map {
            FeedRow(
                original_transaction_id: $0.originalTransactionId, bundle_id: target.bundleId, environment: target.environment.rawValue,
                app_account_token: $0.appAccountToken, source: origin.source.rawValue, notification_uuid: $0.notificationUUID,
                run_id: origin.runId, kind: FeedKind.notification.rawValue, notification_type: $0.notificationType, subtype: $0.subtype,
                transaction_id: $0.transactionId, signed_date_ms: $0.signedDate, respond_by_ms: $0.respondBy?.millisecondsSince1970)
        }
        _ = try await transaction.query(
            RecordInFeedSQL.query(rows: try Self.json(changeRows + eventRows), notify: shadow == nil), preparedAs: RecordInFeedSQL.self,
            logger: logger)
    }
}

/// The change feed's rows, purchases' changes and notifications' events (``PurchaseStore``'s `recordInFeed`).
private enum RecordInFeedSQL: PreparedSQL {
    static func query(rows: String, notify: Bool) -> PostgresQuery {
        """
        WITH recorded AS (
            INSERT INTO purchase_changes (original_transaction_id, bundle_id, environment, app_account_token, source, notification_uuid, run_id,
                kind, before_state, after_state, notification_type, subtype, transaction_id, signed_date_ms, respond_by_ms, app_user_id)
            SELECT r.original_transaction_id, r.bundle_id, r.environment, r.app_account_token, r.source, r.notification_uuid, r.run_id, r.kind,
                r.before_state, r.after_state, r.notification_type, r.subtype, r.transaction_id, r.signed_date_ms, r.respond_by_ms,
                -- A notification's own row carries its purchase's appUserId, as the purchase stands
                -- after this transaction's write (the write path gave it the customer's).
                COALESCE(r.app_user_id, CASE WHEN r.kind = 'notification' THEN (
                    SELECT p.app_user_id FROM purchases p
                    WHERE (p.bundle_id, p.environment, p.original_transaction_id) = (r.bundle_id, r.environment, r.original_transaction_id)) END)
            FROM jsonb_populate_recordset(NULL::purchase_changes, \(rows)::jsonb) AS r
        )
        SELECT pg_notify(\(PurchaseStore.changeChannel), '') WHERE \(notify)
        """
    }

    static let sql = query(rows: "", notify: false).sql
    /// The rows as JSON, the channel, whether to notify (not in a dry run: its changes are its own).
    static let bindingTypes: [PostgresDataType] = [.text, .text, .bool]
}
