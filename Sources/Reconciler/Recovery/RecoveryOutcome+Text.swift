import AppStoreServer
package import Foundation
package import ReconcilerDomain
import ReconcilerShared
package import ReconcilerStore

extension RecoveryOutcome {
    /// What one app and environment did, as the operator reads it: under its header when there are
    /// several, what needs reading first, each window's report, its incident page (`page`: where it
    /// was written), the deliveries.
    package func text(several: Bool, detected: Bool, page: String? = nil) -> String {
        var lines: [String] = several ? ["== \(scope.target)"] : []
        lines += notices
        lines += reports.map { $0.humanSummary() }
        if several, let stop { lines += stopLine(stop) }
        if let page { lines.append(page) }
        if let drained = forwarded {
            lines.append(Self.forwardedLine("\(Plural.count(drained.own.delivered, "notification")) delivered to the app's webhook", drained.own))
            if !drained.earlierRuns.isEmpty {
                let runs = drained.earlierRuns.map(String.init).joined(separator: ", ")
                let label = "earlier runs' deliveries (run\(drained.earlierRuns.count == 1 ? "" : "s") \(runs))"
                lines.append(Self.forwardedLine("\(label): \(drained.earlier.delivered) delivered", drained.earlier))
            }
        }
        if detected, reports.isEmpty, stop == nil, lost.isEmpty {
            lines.append("no failed deliveries found: nothing to recover")
        }
        return lines.joined(separator: "\n")
    }

    /// What stopped one app and environment of several, said once: a report's `failure` line says
    /// it already, so only what the stop adds (the remedy) follows it.
    func stopLine(_ stop: ReconcilerError) -> [String] {
        let message = stop.operatorMessage
        guard let failure = reports.last?.failure, message.hasPrefix(failure) else { return ["\(scope.target): \(message)"] }
        let rest = message.dropFirst(failure.count).drop { $0 == ":" || $0 == ";" || $0 == " " }
        return rest.isEmpty ? [] : ["  remedy       \(rest)"]
    }

    /// `forwarded    <what was delivered>, N pending, N failed`, and what to do about the rest.
    static func forwardedLine(_ delivered: String, _ summary: ForwardQueue.ForwardingSummary) -> String {
        "forwarded    \(delivered), \(summary.pending) pending, \(summary.failed) failed"
            + (summary.pending > 0 ? "; `reconciler forward` or the next run delivers the rest" : "")
            + (summary.failed > 0 ? "; `reconciler forward --retry-failed` tries the failed ones again" : "")
    }

    /// The JSON report of a recovery (`run --report-json`): one app and environment's newest report
    /// as it is (`nil` when it made none); with several, `{"targets": [...]}`, each the newest report
    /// of its app and environment, or where it stopped before one.
    package static func reportJSON(_ outcomes: [RecoveryOutcome]) throws -> Data? {
        guard outcomes.count > 1 else { return try outcomes.first?.reports.last?.json() }
        let entries: [Any] = try outcomes.map { outcome in
            if let report = outcome.reports.last { return try JSONSerialization.jsonObject(with: try report.json()) }
            var entry: [String: Any] = [
                "bundleId": outcome.scope.bundleId, "environment": outcome.scope.environment.rawValue, "exitCode": outcome.exitCode,
            ]
            if let stop = outcome.stop { entry["stopped"] = stop.description }
            if outcome.leaseHeld { entry["leaseHeldByAnotherRun"] = true }
            return entry
        }
        return try JSONSerialization.data(withJSONObject: ["targets": entries], options: [.prettyPrinted, .sortedKeys])
    }
}
