package import AppStoreServer
package import Foundation
package import Logging
import PostgresNIO
package import ReconcilerDomain
package import ReconcilerShared

/// The SQL of `notifications`: every notification this system recorded, live or replayed, once
/// by its `notificationUUID`, with its outcome and (until pruned) Apple's signed payload. A
/// notification recorded for the first time can be queued for the app's own webhook by the same
/// statement (`forward_queue`), so it is forwarded exactly when it is recorded.
///
/// ```swift
/// let inserted = try await store.notifications.insert(rows, source: .webhook, on: transaction)
/// ```
package struct NotificationLog: Sendable {
    package let logger: Logger
    /// The app and environment whose notifications this log records (`nil` for one that only reads).
    package let target: AppTarget?

    package init(logger: Logger, target: AppTarget? = nil) {
        self.logger = logger
        self.target = target
    }

    /// Where a notification came from.
    package enum Source: Sendable, Hashable {
        case webhook
        /// Replayed from Get Notification History by a reconcile run.
        case history(runId: Int64)

        package var name: String {
            switch self {
            case .webhook: "webhook"
            case .history: "history"
            }
        }

        package var runId: Int64? {
            switch self {
            case .webhook: nil
            case .history(let runId): runId
            }
        }
    }

    /// A notification to record, with the outcome to record it under.
    package struct NotificationRow: Sendable {
        package var notification: VerifiedNotification
        package var outcome: HandlingResult.Outcome

        package init(notification: VerifiedNotification, outcome: HandlingResult.Outcome) {
            self.notification = notification
            self.outcome = outcome
        }
    }

    /// One row of `notifications`; the keys are its column names.
    private struct NotificationColumns: Encodable {
        package var notification_uuid: String
        package var notification_type: String
        package var subtype: String?
        package var signed_date_ms: Int64
        package var bundle_id: String
        package var environment: String
        package var original_transaction_id: String?
        package var transaction_id: String?
        package var signed_payload: String
        package var source: String
        package var run_id: Int64?
        package var outcome: String
        package var first_send_attempt_ms: Int64?
        package var respond_by_ms: Int64?
        package var consumption_request_reason: String?
    }

    /// Records notifications; returns the UUIDs that were new (the others are duplicates). With
    /// `forwarding`, the new ones it selects are queued for the app's webhook by the same statement,
    /// each with its deadline (so the forwarder sends the open ones first); with
    /// ``Forwarding/hold``, those without an open deadline are held back (see ``Forwarding``).
    ///
    /// A notification's deadline (`respond_by_ms`) and first send attempt are written with it and
    /// never change: a copy recorded again later is a duplicate.
    package func insert(
        _ rows: [NotificationRow], source: Source, forwarding: Forwarding? = nil, on transaction: DatabaseTransaction
    ) async throws -> Set<String> {
        guard !rows.isEmpty else { return [] }
        guard let target else {
            throw ReconcilerError(.missingApp, "a notification was recorded without naming its app")
        }
        let (bundleId, environment) = (target.bundleId, target.environment.rawValue)
        let json = try PurchaseStore.json(
            rows.map { row in
                let n = row.notification
                return NotificationColumns(
                    notification_uuid: n.notificationUUID, notification_type: n.notificationType.rawValue, subtype: n.subtype?.rawValue,
                    signed_date_ms: n.signedDate, bundle_id: bundleId, environment: n.environment,
                    original_transaction_id: n.originalTransactionId,
                    transaction_id: n.transaction?.transactionId, signed_payload: n.signedPayload, source: source.name,
                    run_id: source.runId, outcome: row.outcome.rawValue, first_send_attempt_ms: n.firstSendAttempt,
                    respond_by_ms: n.respondBy?.millisecondsSince1970,
                    consumption_request_reason: n.payload.data?.consumptionRequestReason?.rawValue)
            })
        let only = forwarding?.only.map { Array($0).sorted() }
        let holdMilliseconds = forwarding?.hold.map(\.milliseconds)
        let result = try await transaction.query(
            """
            WITH inserted AS (
                INSERT INTO notifications (\(unescaped: Self.notificationColumns))
                SELECT \(unescaped: Self.notificationColumns) FROM jsonb_populate_recordset(NULL::notifications, \(json)::jsonb)
                ON CONFLICT (notification_uuid) DO NOTHING
                RETURNING notification_uuid, respond_by_ms
            ), deliveries AS (
                SELECT notification_uuid, respond_by_ms,
                       \(holdMilliseconds)::bigint IS NOT NULL
                           AND NOT coalesce(respond_by_ms > (extract(epoch FROM now()) * 1000)::bigint, false) AS held
                FROM inserted
                WHERE \(forwarding?.target.id)::text IS NOT NULL AND (\(only)::text[] IS NULL OR notification_uuid = ANY(\(only)::text[]))
            ), queued AS (
                INSERT INTO forward_queue (notification_uuid, target_id, target_redacted, run_id, bundle_id, environment, respond_by_ms, held,
                    next_attempt_at)
                SELECT notification_uuid, \(forwarding?.target.id), \(forwarding?.target.redacted), \(source.runId), \(bundleId), \(environment),
                    respond_by_ms, held, CASE WHEN held THEN now() + \(holdMilliseconds) * interval '1 millisecond' ELSE now() END
                FROM deliveries
                ORDER BY notification_uuid
                ON CONFLICT (notification_uuid, target_id) DO NOTHING
            )
            SELECT notification_uuid FROM inserted
            """, logger: logger)
        var inserted = Set<String>()
        for try await uuid in result.decode(String.self) { inserted.insert(uuid) }
        return inserted
    }

    package static let notificationColumns = """
        notification_uuid, notification_type, subtype, signed_date_ms, bundle_id, environment, original_transaction_id, transaction_id,
        signed_payload, source, run_id, outcome, first_send_attempt_ms, respond_by_ms, consumption_request_reason
        """

    /// When a run's replay recorded the last of the notifications of these types (`received_at`).
    package func lastRecorded(runId: Int64, types: [String], on transaction: DatabaseTransaction) async throws -> Date? {
        let rows = try await transaction.query(
            """
            SELECT max(received_at) FROM notifications WHERE run_id = \(runId) AND notification_type = ANY(\(types)::text[])
            """, logger: logger)
        for try await value in rows.decode(Date?.self) { return value }
        return nil
    }

    /// Whether a notification is recorded.
    package func hasNotification(uuid: String, on transaction: DatabaseTransaction) async throws -> Bool {
        let rows = try await transaction.query("SELECT 1 FROM notifications WHERE notification_uuid = \(uuid)", logger: logger)
        for try await _ in rows { return true }
        return false
    }

    /// The signedDate of the newest notification the live webhook stored, for `run --since-last`.
    package func newestLive(of target: AppTarget, on transaction: DatabaseTransaction) async throws -> Timestamp? {
        let rows = try await transaction.query(
            """
            SELECT max(signed_date_ms) FROM notifications
            WHERE source = 'webhook' AND bundle_id = \(target.bundleId) AND environment = \(target.environment.rawValue)
            """, logger: logger)
        for try await value in rows.decode(Int64?.self) { return value.map(Timestamp.init(millisecondsSince1970:)) }
        return nil
    }

    /// Where to forward recorded notifications, and which: the app's own webhook gets each one
    /// this system records for the first time, unless `only` names the ones to forward (a replay
    /// forwards those Apple did not deliver).
    ///
    /// With `hold`, a delivery whose notification has no open deadline (all but the consumption
    /// requests still before theirs) waits: it is due only after `hold`, or when its run releases it
    /// (``ForwardQueue/releaseHeldDeliveries(runId:)``) once the run's query of consumption requests
    /// is done, so the app hears of those first. The live webhook never holds.
    package struct Forwarding: Sendable {
        /// The webhook the queue rows name (an id and the redacted URL, never the URL itself).
        package var target: ForwardingTarget
        package var only: Set<String>?
        /// Hold deliveries without an open deadline back for at most this long.
        package var hold: Duration?

        package init(target: ForwardingTarget, only: Set<String>? = nil, hold: Duration? = nil) {
            self.target = target
            self.only = only
            self.hold = hold
        }
    }
}
