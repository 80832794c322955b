import Foundation
import Synchronization

/// Counters of the live endpoint, served as Prometheus text by `GET /metrics`.
public final class WebhookMetrics: Sendable {
    private struct Counts {
        var handled: [String: [String: Int]] = [:]   // type/subtype → outcome → count
        var rejected: [String: Int] = [:]            // reason → count
        var failed = 0
        var lastNotificationTime: Double?
    }

    private let counts = Mutex(Counts())

    public init() {}

    func handled(typeAndSubtype: String, outcome: String) {
        counts.withLock {
            $0.handled[typeAndSubtype, default: [:]][outcome, default: 0] += 1
            $0.lastNotificationTime = Date().timeIntervalSince1970
        }
    }

    func rejected(reason: String) { counts.withLock { $0.rejected[reason, default: 0] += 1 } }
    func failed() { counts.withLock { $0.failed += 1 } }

    public func prometheusText() -> String {
        let snapshot = counts.withLock { $0 }
        var lines: [String] = []
        lines.append("# HELP reconciler_webhook_notifications_total Notifications received by the webhook, by type and outcome.")
        lines.append("# TYPE reconciler_webhook_notifications_total counter")
        for (type, outcomes) in snapshot.handled.sorted(by: { $0.key < $1.key }) {
            for (outcome, count) in outcomes.sorted(by: { $0.key < $1.key }) {
                lines.append("reconciler_webhook_notifications_total{type=\"\(Self.escape(type))\",outcome=\"\(outcome)\"} \(count)")
            }
        }
        lines.append("# HELP reconciler_webhook_rejected_total Requests rejected, by reason; nothing was stored.")
        lines.append("# TYPE reconciler_webhook_rejected_total counter")
        for (reason, count) in snapshot.rejected.sorted(by: { $0.key < $1.key }) {
            lines.append("reconciler_webhook_rejected_total{reason=\"\(reason)\"} \(count)")
        }
        lines.append("# HELP reconciler_webhook_store_failures_total Notifications not stored because the database failed (Apple retries them).")
        lines.append("# TYPE reconciler_webhook_store_failures_total counter")
        lines.append("reconciler_webhook_store_failures_total \(snapshot.failed)")
        if let last = snapshot.lastNotificationTime {
            lines.append("# HELP reconciler_webhook_last_notification_timestamp_seconds When the last notification was stored.")
            lines.append("# TYPE reconciler_webhook_last_notification_timestamp_seconds gauge")
            lines.append("reconciler_webhook_last_notification_timestamp_seconds \(String(format: "%.3f", last))")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    static func escape(_ value: String) -> String {
        value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
    }
}
