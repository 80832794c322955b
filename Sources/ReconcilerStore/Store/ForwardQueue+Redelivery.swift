package import AppStoreServer
package import Foundation
import PostgresNIO
package import ReconcilerDomain
package import ReconcilerShared

/// Deliveries again on demand (`reconciler forward --redeliver`): the notifications an app and
/// environment first received in a window, queued again for a webhook as new rows of
/// `forward_redeliveries` (migration 0022), acknowledged ones included. The forwarder of the
/// webhook leases them after its due first deliveries and sends each with `Reconciler-Redelivery: 1`.
/// `forward_queue` keeps one row per notification and webhook, with the key a binary from before
/// 0022 inserts by.
extension ForwardQueue {
    /// What a redelivery queued (or, dry, would queue), and what it could not.
    package struct Redelivery: Sendable, Hashable {
        /// Queued again (dry: would be).
        package var queued = 0
        /// Not sent: their stored payload was pruned or does not rebuild.
        package var notSent: [NotSent] = []

        package init() {}
    }

    /// A notification of the window a redelivery cannot send.
    package struct NotSent: Sendable, Hashable {
        package var notificationUUID: String
        /// `payload pruned` or `payload does not rebuild`.
        package var reason: String

        package init(notificationUUID: String, reason: String) {
            self.notificationUUID = notificationUUID
            self.reason = reason
        }
    }

    /// Queues again for `route`'s webhook the notifications of `app` first received in `window`
    /// whose type both `route` and `types` take, each as a new row; with `dryRun`, counts the same
    /// and changes nothing. One
    /// transaction: a notification is queued again once per call. A notification whose payload
    /// was pruned or does not rebuild is listed, not queued.
    package func redeliver(
        app: AppTarget, route: ForwardingRoute, window: TimeWindow, types: NotificationTypeFilter, dryRun: Bool
    ) async throws -> Redelivery {
        let target = route.target
        return try await database.transaction { [self] transaction in
            let rows = try await transaction.query(
                """
                SELECT n.notification_uuid, n.notification_type, n.subtype, \(unescaped: NotificationLog.payloadColumns),
                    (SELECT jsonb_object_agg(encode(h.sha256, 'hex'), h.encoded_header)::text FROM jws_headers h
                     WHERE h.sha256 IN (n.header_sha256, n.transaction_header_sha256, n.renewal_header_sha256)) AS headers
                FROM notifications n
                WHERE n.bundle_id = \(app.bundleId) AND n.environment = \(app.environment)
                    AND n.received_at >= to_timestamp(\(window.start) / 1000.0) AND n.received_at < to_timestamp(\(window.end) / 1000.0)
                ORDER BY n.received_at, n.notification_uuid
                """, logger: logger)
            var result = Redelivery()
            var sendable: [String] = []
            for try await row in rows {
                let columns = NamedColumns(row)
                let (type, subtype): (String, String?) = (try columns["notification_type"], try columns["subtype"])
                guard route.takes(type: type, subtype: subtype), types.matches(type: type, subtype: subtype) else { continue }
                let uuid: String = try columns["notification_uuid"]
                let headers = try (columns["headers"] as String?).map { try JSONDecoder().decode([String: String].self, from: Data($0.utf8)) } ?? [:]
                switch try NotificationLog.storedPayload(columns, header: { headers[Bytea.plainHex($0)] }) {
                case .signed: sendable.append(uuid)
                case .pruned: result.notSent.append(NotSent(notificationUUID: uuid, reason: "payload pruned"))
                case .incomplete: result.notSent.append(NotSent(notificationUUID: uuid, reason: "payload does not rebuild"))
                }
            }
            guard !dryRun, !sendable.isEmpty else {
                result.queued = sendable.count
                return result
            }
            let inserted = try await transaction.query(
                """
                INSERT INTO forward_redeliveries (notification_uuid, target_id, target_redacted, bundle_id, environment)
                SELECT notification_uuid, \(target.id), \(target.redacted), \(app.bundleId), \(app.environment)
                FROM unnest(\(sendable)::text[]) WITH ORDINALITY AS u(notification_uuid, position)
                ORDER BY position
                RETURNING 1
                """, logger: logger)
            for try await _ in inserted { result.queued += 1 }
            return result
        }
    }

    /// Leases the oldest due redelivery for `target` (as ``leaseDelivery(target:worker:token:leaseDuration:dueBy:on:)``
    /// a first delivery); one whose payload cannot be rebuilt any more is marked failed and the
    /// next is leased, at most ``unrebuildablePerLease`` per call.
    func leaseRedelivery(
        target: ForwardingTarget, worker: String, token: UUID, leaseDuration: Duration, dueBy: Date?, on transaction: DatabaseTransaction
    ) async throws -> Delivery? {
        for _ in 0..<Self.unrebuildablePerLease {
            let rows = try await transaction.query(
                """
                UPDATE forward_redeliveries AS q SET status = 'leased', worker = \(worker), lease_token = \(token),
                    lease_until = now() + \(leaseDuration.milliseconds) * interval '1 millisecond'
                FROM (
                    SELECT redelivery_id FROM forward_redeliveries
                    WHERE target_id = \(target.id)
                        AND ((status = 'pending' AND next_attempt_at <= coalesce(\(dueBy), now())) OR (status = 'leased' AND lease_until < now()))
                    ORDER BY next_attempt_at, redelivery_id
                    LIMIT 1 FOR UPDATE SKIP LOCKED
                ) AS due, notifications n
                WHERE q.redelivery_id = due.redelivery_id AND n.notification_uuid = q.notification_uuid
                RETURNING q.redelivery_id, q.notification_uuid, q.target_redacted, q.attempts, \(unescaped: NotificationLog.payloadColumns),
                    (SELECT jsonb_object_agg(encode(h.sha256, 'hex'), h.encoded_header)::text FROM jws_headers h
                     WHERE h.sha256 IN (n.header_sha256, n.transaction_header_sha256, n.renewal_header_sha256)) AS headers
                """, logger: logger)
            var leased: NamedColumns?
            for try await row in rows { leased = NamedColumns(row) }
            guard let columns = leased else { return nil }
            let headers = try (columns["headers"] as String?).map { try JSONDecoder().decode([String: String].self, from: Data($0.utf8)) } ?? [:]
            let uuid: String = try columns["notification_uuid"]
            let stored = try NotificationLog.storedPayload(columns, header: { headers[Bytea.plainHex($0)] })
            guard let payload = stored.jws else {
                let missing = try NotificationLog.headerHashes(columns).map(Bytea.plainHex).filter { headers[$0] == nil }
                try await failUnrebuildable(
                    uuid, target: target, token: token, stored: stored, missingHeaders: missing, table: "forward_redeliveries", on: transaction)
                continue
            }
            return Delivery(
                notificationUUID: uuid, target: ForwardingTarget(id: target.id, redacted: try columns["target_redacted"]),
                signedPayload: payload, attempts: try columns["attempts"], leaseToken: token, redeliveryId: try columns["redelivery_id"])
        }
        return nil
    }
}
