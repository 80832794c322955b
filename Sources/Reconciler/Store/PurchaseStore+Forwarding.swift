import Foundation
import PostgresNIO

/// The queue of notifications to deliver to the app's own webhook, written by the statement that
/// records each notification (``insertNotifications(_:source:forwarding:on:)``); forwarders lease
/// due deliveries (rows they own for a while), send them with no transaction open, and record the
/// app's answer.
extension PurchaseStore {
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
        let rows = try await connection.query(
            """
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
            try await connection.query(
                """
                UPDATE forward_queue SET status = 'delivered', attempts = attempts + 1, last_status_code = \(code), last_error = NULL,
                    delivered_at = now(), lease_until = NULL
                WHERE notification_uuid = \(delivery.notificationUUID) AND target_url = \(delivery.targetURL) AND status = 'leased' AND worker = \(worker)
                """, logger: logger)
        case .retry(let code, let error, let after):
            let milliseconds = after.components.seconds * 1000 + after.components.attoseconds / 1_000_000_000_000_000
            try await connection.query(
                """
                UPDATE forward_queue SET status = 'pending', attempts = attempts + 1, last_status_code = \(code), last_error = \(error),
                    next_attempt_at = now() + \(milliseconds) * interval '1 millisecond', lease_until = NULL
                WHERE notification_uuid = \(delivery.notificationUUID) AND target_url = \(delivery.targetURL) AND status = 'leased' AND worker = \(worker)
                """, logger: logger)
        case .failed(let code, let error):
            try await connection.query(
                """
                UPDATE forward_queue SET status = 'failed', attempts = attempts + 1, last_status_code = \(code), last_error = \(error), lease_until = NULL
                WHERE notification_uuid = \(delivery.notificationUUID) AND target_url = \(delivery.targetURL) AND status = 'leased' AND worker = \(worker)
                """, logger: logger)
        }
    }

    /// Puts back the deliveries leased by workers that `isGone` (a forwarder of this host that
    /// died), so they are sent again now rather than when their lease runs out.
    public func releaseDeliveries(where isGone: (String) -> Bool, on connection: PostgresConnection) async throws {
        let rows = try await connection.query(
            "SELECT DISTINCT worker FROM forward_queue WHERE status = 'leased' AND worker IS NOT NULL", logger: logger)
        var gone: [String] = []
        for try await worker in rows.decode(String.self) where isGone(worker) { gone.append(worker) }
        guard !gone.isEmpty else { return }
        try await connection.query(
            """
            UPDATE forward_queue SET status = 'pending', lease_until = NULL, next_attempt_at = now()
            WHERE status = 'leased' AND worker = ANY(\(gone.sorted()))
            """, logger: logger)
    }

    /// Gives failed deliveries (out of attempts) a new set of attempts, after the app's endpoint
    /// was fixed; returns how many.
    public func retryFailedDeliveries(on connection: PostgresConnection) async throws -> Int {
        let rows = try await connection.query(
            """
            WITH retried AS (
                UPDATE forward_queue SET status = 'pending', attempts = 0, next_attempt_at = now(), lease_until = NULL
                WHERE status = 'failed' RETURNING 1
            )
            SELECT count(*) FROM retried
            """, logger: logger)
        for try await count in rows.decode(Int.self) { return count }
        return 0
    }

    /// Deliveries by state: of some runs' notifications, or of the whole queue.
    public struct ForwardingSummary: Sendable, Codable, Hashable {
        public var delivered = 0
        /// Waiting for their first try or a retry, or being sent.
        public var pending = 0
        /// Out of attempts: `reconciler forward --retry-failed` tries them again.
        public var failed = 0
        /// When the oldest delivery still waiting was queued.
        public var oldestPending: Date?

        public init() {}
    }

    /// Where a delivery stands (`forward_queue.status`).
    public enum DeliveryStatus: String, Sendable, Codable, CaseIterable {
        /// Waiting for its first try, or for a retry at `next_attempt_at`.
        case pending
        /// A forwarder is sending it (until `lease_until`).
        case leased
        /// The app answered 2xx: never sent again.
        case delivered
        /// Out of attempts.
        case failed
    }

    /// Where the deliveries of `runIds` stand (`nil`: the whole queue).
    public func forwardingSummary(runIds: [Int64]?, on connection: PostgresConnection) async throws -> ForwardingSummary {
        let rows = try await connection.query(
            """
            SELECT status, count(*), min(queued_at) FROM forward_queue
            WHERE \(runIds == nil) OR run_id = ANY(\(runIds ?? []))
            GROUP BY status
            """, logger: logger)
        var summary = ForwardingSummary()
        for try await (status, count, oldest) in rows.decode((String, Int, Date).self) {
            switch DeliveryStatus(rawValue: status) {
            case .delivered: summary.delivered += count
            case .failed: summary.failed += count
            case .pending, .leased:
                summary.pending += count
                summary.oldestPending = min(summary.oldestPending ?? oldest, oldest)
            case nil: continue
            }
        }
        return summary
    }
}
