import AppStoreServer
import Foundation
import Reconciler

/// A run's metrics in Prometheus text format for node_exporter's textfile collector. The file is
/// replaced atomically (written beside it, then renamed), as the collector requires.
enum RunMetrics {
    static func text(report: RunReport, lastSuccess: Date?, unacknowledgedQuarantine: Int?, exitCode: Int32) -> String {
        let labels = "environment=\"\(report.environment)\",bundle_id=\"\(escape(report.bundleId))\""
        var lines: [String] = []
        func metric(_ name: String, _ type: String, _ help: String, _ samples: [(String, String)]) {
            lines.append("# HELP \(name) \(help)")
            lines.append("# TYPE \(name) \(type)")
            for (extra, value) in samples {
                lines.append("\(name){\(labels)\(extra.isEmpty ? "" : ",\(extra)")} \(value)")
            }
        }
        metric("reconciler_run_duration_seconds", "gauge", "Duration of the last reconcile run.", [("", String(format: "%.3f", report.durationSeconds))])
        if let urgent = report.urgentRecoverySeconds {
            metric("reconciler_run_urgent_recovery_seconds", "gauge",
                   "When the last run applied its last DID_RENEW or EXPIRED notification, after it started.", [("", String(format: "%.3f", urgent))])
        }
        metric("reconciler_run_status", "gauge", "1 for the last run's status, 0 for the others.",
               RunRecord.Status.allCases.filter { $0 != .running }.map { ("status=\"\($0.rawValue)\"", report.status == $0 ? "1" : "0") })
        metric("reconciler_run_exit_code", "gauge", "Exit code of the last invocation: 0 done, 4 needs attention, 2 partial, 1 configuration.",
               [("", String(exitCode))])
        metric("reconciler_run_dry_run", "gauge", "1 when the last run was a dry run.", [("", report.dryRun ? "1" : "0")])
        metric("reconciler_run_window_start_timestamp_seconds", "gauge", "Start of the last run's window.", [("", seconds(report.windowStart))])
        metric("reconciler_run_window_end_timestamp_seconds", "gauge", "End of the last run's window.", [("", seconds(report.windowEnd))])
        var notificationSamples: [(String, String)] = []
        for (type, counts) in report.notificationsByType.sorted(by: { $0.key < $1.key }) {
            for (outcome, value) in [("applied", counts.applied), ("stale", counts.stale), ("recorded", counts.recorded),
                                     ("duplicate", counts.duplicate), ("rejected", counts.rejected)] where value > 0 {
                notificationSamples.append(("type=\"\(escape(type))\",outcome=\"\(outcome)\"", String(value)))
            }
        }
        metric("reconciler_run_notifications", "gauge", "Notifications the last run saw, by type and outcome.", notificationSamples)
        metric("reconciler_run_customers_changed", "gauge", "Purchases whose state the last run changed.", [("", String(report.changes.count))])
        metric("reconciler_run_customers_checked", "gauge", "Customers the last run checked by transaction history.", [("", String(report.customersChecked))])
        metric("reconciler_run_customers_failed", "gauge", "Customers the last run could not check.", [("", String(report.customersFailed.count))])
        metric("reconciler_run_shards_failed", "gauge", "History shards the last run could not page.", [("", String(report.shardsFailed.count))])
        metric("reconciler_run_rejections", "gauge", "Signed values the last run met that failed verification, new or already quarantined.",
               [("new=\"true\"", String(report.rejections.filter(\.newlyQuarantined).count)),
                ("new=\"false\"", String(report.rejections.filter { !$0.newlyQuarantined }.count))])
        if let unacknowledgedQuarantine {
            metric("reconciler_quarantined_payloads_unacknowledged", "gauge",
                   "Quarantined payloads nobody acknowledged yet (reconciler rejections --ack).", [("", String(unacknowledgedQuarantine))])
        }
        metric("reconciler_run_api_requests", "gauge", "App Store Server API requests of the last run.", [("", String(report.api.requests))])
        metric("reconciler_run_api_retries", "gauge", "Requests of the last run that repeated a failed one.", [("", String(report.api.retries))])
        metric("reconciler_run_api_rate_limited", "gauge", "429 responses the last run received.", [("", String(report.api.rateLimited))])
        metric("reconciler_run_api_server_errors", "gauge", "5xx responses the last run received.", [("", String(report.api.serverErrors))])
        if let lastSuccess {
            metric("reconciler_last_success_timestamp_seconds", "gauge", "When a (non dry) run last succeeded.",
                   [("", String(format: "%.3f", lastSuccess.timeIntervalSince1970))])
        }
        return lines.joined(separator: "\n") + "\n"
    }

    static func write(report: RunReport, to path: String, lastSuccess: Date?, unacknowledgedQuarantine: Int?, exitCode: Int32) throws {
        let temporary = path + ".tmp"
        do {
            try text(report: report, lastSuccess: lastSuccess, unacknowledgedQuarantine: unacknowledgedQuarantine, exitCode: exitCode)
                .write(toFile: temporary, atomically: false, encoding: .utf8)
            if FileManager.default.fileExists(atPath: path) { _ = try FileManager.default.replaceItemAt(URL(fileURLWithPath: path), withItemAt: URL(fileURLWithPath: temporary)) }
            else { try FileManager.default.moveItem(atPath: temporary, toPath: path) }
        } catch {
            throw CommandError.configuration("cannot write the metrics file \(path): \(error.localizedDescription)")
        }
    }

    static func seconds(_ milliseconds: Int64) -> String { String(format: "%.3f", Double(milliseconds) / 1000) }
    static func escape(_ value: String) -> String { value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") }
}
