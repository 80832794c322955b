import Foundation
import PostgresNIO

/// The queue of notifications to deliver to the app's own webhook, written in the transaction
/// that records each notification; forwarders lease due deliveries (rows they own for a while),
/// send them with no transaction open, and record the app's answer.
extension PurchaseStore {
    /// Queues notifications for the app's webhook (in the caller's transaction).
    func enqueueForwarding(_ notificationUUIDs: [String], to targetURL: String, runId: Int64?, on connection: PostgresConnection) async throws {
        guard !notificationUUIDs.isEmpty else { return }
        try await connection.query("""
            INSERT INTO forward_queue (notification_uuid, target_url, run_id)
            SELECT uuid, \(targetURL), \(runId) FROM unnest(\(notificationUUIDs.sorted())::text[]) AS n (uuid)
            ON CONFLICT (notification_uuid, target_url) DO NOTHING
            """, logger: logger)
    }

    /// One notification to deliver.
    public struct Delivery: Sendable, Hashable {
        public var notificationUUID: String
        public var targetURL: String
        /// The notification's JWS, as Apple signed it.
        public var signedPayload: String
        /// Deliveries tried before this one.
        public var attempts: Int
    }

    /// Leases up to `limit` deliveries that are due (new, due for a retry, or held by a forwarder
    /// whose lease ran out), oldest first.
    public func leaseDeliveries(worker: String, limit: Int, leaseDuration: Duration, on connection: PostgresConnection) async throws -> [Delivery] {
        let milliseconds = leaseDuration.components.seconds * 1000 + leaseDuration.components.attoseconds / 1_000_000_000_000_000
        let rows = try await connection.query("""
            UPDATE forward_queue AS q SET status = 'leased', worker = \(worker), lease_until = now() + \(milliseconds) * interval '1 millisecond'
            FROM (
                SELECT notification_uuid, target_url FROM forward_queue
                WHERE (status = 'pending' AND next_attempt_at <= now()) OR (status = 'leased' AND lease_until < now())
                ORDER BY next_attempt_at, notification_uuid
                LIMIT \(limit) FOR UPDATE SKIP LOCKED
            ) AS due, notifications n
            WHERE q.notification_uuid = due.notification_uuid AND q.target_url = due.target_url AND n.notification_uuid = q.notification_uuid
            RETURNING q.notification_uuid, q.target_url, n.signed_payload, q.attempts
            """, logger: logger)
        var deliveries: [Delivery] = []
        for try await (uuid, target, payload, attempts) in rows.decode((String, String, String, Int).self) {
            deliveries.append(Delivery(notificationUUID: uuid, targetURL: target, signedPayload: payload, attempts: attempts))
        }
        return deliveries
    }

    /// What the app answered to a delivery.
    public enum DeliveryResult: Sendable {
        /// A 2xx: never sent again.
        case delivered(statusCode: Int)
        /// Another status or no answer: tried again after `retryAfter`.
        case retry(statusCode: Int?, error: String, after: Duration)
        /// Out of attempts.
        case failed(statusCode: Int?, error: String)
    }

    /// Records the app's answer to a delivery this worker leased.
    public func recordDelivery(_ delivery: Delivery, worker: String, result: DeliveryResult, on connection: PostgresConnection) async throws {
        switch result {
        case .delivered(let code):
            try await connection.query("""
                UPDATE forward_queue SET status = 'delivered', attempts = attempts + 1, last_status_code = \(code), last_error = NULL,
                    delivered_at = now(), lease_until = NULL
                WHERE notification_uuid = \(delivery.notificationUUID) AND target_url = \(delivery.targetURL) AND status = 'leased' AND worker = \(worker)
                """, logger: logger)
        case .retry(let code, let error, let after):
            let milliseconds = after.components.seconds * 1000 + after.components.attoseconds / 1_000_000_000_000_000
            try await connection.query("""
                UPDATE forward_queue SET status = 'pending', attempts = attempts + 1, last_status_code = \(code), last_error = \(error),
                    next_attempt_at = now() + \(milliseconds) * interval '1 millisecond', lease_until = NULL
                WHERE notification_uuid = \(delivery.notificationUUID) AND target_url = \(delivery.targetURL) AND status = 'leased' AND worker = \(worker)
                """, logger: logger)
        case .failed(let code, let error):
            try await connection.query("""
                UPDATE forward_queue SET status = 'failed', attempts = attempts + 1, last_status_code = \(code), last_error = \(error), lease_until = NULL
                WHERE notification_uuid = \(delivery.notificationUUID) AND target_url = \(delivery.targetURL) AND status = 'leased' AND worker = \(worker)
                """, logger: logger)
        }
    }

    /// Deliveries by state: of one run's notifications, or of the whole queue.
    public struct ForwardingSummary: Sendable, Codable, Hashable {
        public var delivered = 0
        /// Waiting for their first try or a retry, or being sent.
        public var pending = 0
        public var failed = 0
        /// When the oldest delivery still waiting was queued.
        public var oldestPending: Date?

        public init() {}
    }

    public func forwardingSummary(runId: Int64?, on connection: PostgresConnection) async throws -> ForwardingSummary {
        let rows = try await connection.query("""
            SELECT count(*) FILTER (WHERE status = 'delivered'), count(*) FILTER (WHERE status IN ('pending', 'leased')),
                   count(*) FILTER (WHERE status = 'failed'), min(queued_at) FILTER (WHERE status IN ('pending', 'leased'))
            FROM forward_queue WHERE \(runId)::bigint IS NULL OR run_id = \(runId)
            """, logger: logger)
        var summary = ForwardingSummary()
        for try await (delivered, pending, failed, oldest) in rows.decode((Int, Int, Int, Date?).self) {
            (summary.delivered, summary.pending, summary.failed, summary.oldestPending) = (delivered, pending, failed, oldest)
        }
        return summary
    }
}
