import AppStoreServer
import CoreMetrics
package import Foundation
package import Reconciler
import ReconcilerDomain
import ReconcilerShared
package import ReconcilerStore

/// The last `run` invocation as gauges, for `run --metrics-file` (node_exporter's textfile
/// collector): its exit code and end always, and the figures of its last report when it made one
/// (an invocation stopped by its configuration may have none).
///
/// ```swift
/// let metrics = MetricsRegistry(app: AppTarget(bundleId: "com.example.app", environment: .production))
/// RunMetrics.record(exitCode: 0, kind: .scheduled, report: report, in: metrics)
/// try? await LedgerMetrics(ledger: ledger, app: AppTarget(bundleId: "com.example.app", environment: .production), registry: metrics).refresh()
/// try metrics.writeTextfile(to: "/var/lib/node_exporter/textfile_collector/reconciler.prom")
/// ```
package enum RunMetrics {
    /// The outcomes `reconciler_run_notifications` counts, as the report names them.
    static func outcomes(_ counts: RunReport.NotificationCounts) -> [(String, Int)] {
        [
            ("applied", counts.applied), ("stale", counts.stale), ("recorded", counts.recorded), ("duplicate", counts.duplicate),
            ("rejected", counts.rejected),
        ]
    }

    package static func record(exitCode: Int32, kind: RunRecord.Kind, report: RunReport?, endedAt: Date = Date(), in metrics: MetricsRegistry) {
        recordOutcome(exitCode: exitCode, kind: kind, status: report?.status, endedAt: endedAt, in: metrics)
        guard let report else { return }
        func set(_ definition: MetricDefinition, _ value: Double) { definition.gauge(in: metrics).record(value) }
        func set(_ definition: MetricDefinition, _ value: Int) { definition.gauge(in: metrics).record(Int64(value)) }
        set(.runDryRun, report.dryRun ? 1 : 0)
        set(.runDuration, report.durationSeconds)
        if let urgent = report.urgentRecoverySeconds { set(.runUrgentRecovery, urgent) }
        set(.runWindowStart, report.windowStart.secondsSince1970)
        set(.runWindowEnd, report.windowEnd.secondsSince1970)
        for (type, counts) in report.notificationsByType {
            for (outcome, count) in outcomes(counts) where count > 0 {
                MetricDefinition.runNotifications.gauge([type, outcome], in: metrics).record(Int64(count))
            }
        }
        if let requests = report.consumptionRequests {
            let (open, expired) = (report.consumptionRequestsOpen ?? 0, report.consumptionRequestsExpired ?? 0)
            let acked = report.consumptionRequestsAcked ?? requests.filter(\.acked).count
            let answered = report.consumptionRequestsTotal.map { $0 - open - expired - acked } ?? requests.filter(\.answered).count
            let states = [("open", open), ("expired", expired), ("answered", answered), ("acked", acked)]
            for (state, count) in states {
                MetricDefinition.runConsumptionRequests.gauge([state], in: metrics).record(Int64(count))
            }
        }
        set(.runPurchasesChanged, report.changesTotal)
        set(.runCustomersChecked, report.customersChecked)
        set(.runCustomersFailed, report.customersFailed.count)
        set(.runShardsFailed, report.shardsFailed.count)
        let newlyQuarantined = report.rejections.filter(\.newlyQuarantined).count
        MetricDefinition.runRejections.gauge(["true"], in: metrics).record(Int64(newlyQuarantined))
        MetricDefinition.runRejections.gauge(["false"], in: metrics).record(Int64(report.rejections.count - newlyQuarantined))
        set(.runAPIRequests, report.api.requests)
        set(.runAPIRetries, report.api.retries)
        set(.runAPIRateLimited, report.api.rateLimited)
        set(.runAPIServerErrors, report.api.serverErrors)
        set(.runAPITransportErrors, report.api.transportErrors)
        set(.runAPIFailedCalls, report.api.failedCalls)
    }

    /// Only the series labelled by `kind`: the exit code, the end and the status. `repair
    /// --metrics-file` writes just these, so its file can sit beside the scheduled run's in
    /// node_exporter's directory without two files carrying the same series.
    package static func recordOutcome(
        exitCode: Int32, kind: RunRecord.Kind, status: RunRecord.Status?, endedAt: Date = Date(),
        in metrics: MetricsRegistry
    ) {
        let kind = kind.rawValue
        MetricDefinition.runExitCode.gauge([kind], in: metrics).record(Int64(exitCode))
        MetricDefinition.runEnd.gauge([kind], in: metrics).record(endedAt.timeIntervalSince1970)
        guard let status else { return }
        // A finished report is never `running`.
        for candidate in RunRecord.Status.allCases where candidate != .running {
            MetricDefinition.runStatus.gauge([kind, candidate.rawValue], in: metrics).record(status == candidate ? 1 : 0)
        }
    }
}
