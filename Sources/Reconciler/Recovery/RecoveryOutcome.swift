package import ReconcilerDomain
import ReconcilerShared
package import ReconcilerStore

/// What a ``Recovery`` did for one app and environment, over one window or several, and how it
/// ended.
package struct RecoveryOutcome: Sendable {
    /// The app and environment of these runs.
    package var scope: AppScope
    /// Each run's report, in the order the windows ran.
    package var reports: [RunReport] = []
    /// Scheduled windows given up because they left Apple's retention.
    package var lost: [RunRecord] = []
    /// What the operator should read before the reports (lost windows, a schedule's first window).
    package var notices: [String] = []
    /// Where the runs' deliveries to the app's webhook stood at the end, when there is a forwarder.
    package var forwarded: ForwardingDrain?
    /// The error that stopped this target's recovery.
    package var stop: ReconcilerError?
    /// Another run of this app and environment held the lease, so this one did nothing.
    package var leaseHeld = false

    package init(scope: AppScope) {
        self.scope = scope
    }

    /// The most pressing of the reports (``ExitClass/mostPressing(_:)-([ExitClass])``); windows
    /// lost to retention need a person.
    package var exitCode: Int32 {
        if let stop { return stop.exitCode }
        let classes = reports.map { ExitClass(runStatus: $0.status) } + (lost.isEmpty ? [] : [.attention])
        return ExitClass.mostPressing(classes).map { classes[$0].rawValue } ?? 0
    }

    /// The error this outcome ends its command with, when it is not a success.
    package var error: ReconcilerError {
        if let stop { return stop }
        if let report = reports.last(where: { $0.status == .partial || $0.status == .interrupted || $0.status == .failed }) {
            return .partial("not everything was recovered (run \(report.runId) is \(report.status.rawValue)); rerun the same command to resume it")
        }
        let quarantined = reports.reduce(0) { $0 + $1.rejections.filter(\.newlyQuarantined).count }
        return .attention(
            "done, but needs attention: \(Plural.count(quarantined, "payload")) newly quarantined (`reconciler rejections`), "
                + "\(Plural.count(lost.count, "window")) lost to retention, refused requests are listed in the report")
    }

    /// The outcome that decides a whole invocation's exit code: configuration (1) over retryable
    /// (2) over attention (4); `nil` when everything was recovered. In a recovery of several apps
    /// and environments, one whose lease another run holds is being recovered there, and counts
    /// as done here.
    package static func worst(_ outcomes: [RecoveryOutcome]) -> RecoveryOutcome? {
        worstIndex(outcomes).map { outcomes[$0] }
    }

    /// The error a recovery ends its command with: the worst outcome's (``worst(_:)``); with
    /// several, each one's section said what stopped it, so it names them instead of saying it again.
    /// `nil` when everything was recovered.
    package static func ending(_ outcomes: [RecoveryOutcome]) -> ReconcilerError? {
        guard let worst = worst(outcomes) else { return nil }
        guard outcomes.count > 1 else { return worst.error }
        let named = outcomes.filter { !$0.leaseHeld && $0.exitCode == worst.exitCode }.map { "\($0.scope.target)" }
        return ReconcilerError(
            worst.error.code,
            "\(named.joined(separator: ", ")) \(named.count == 1 ? "was" : "were") not recovered in full (exit \(worst.exitCode)): "
                + "\(named.count == 1 ? "its section" : "their sections") above \(named.count == 1 ? "says" : "say") why")
    }

    package static func worstIndex(_ outcomes: [RecoveryOutcome]) -> Int? {
        let several = outcomes.count > 1
        return ExitClass.mostPressing(outcomes.map { several && $0.leaseHeld ? 0 : $0.exitCode })
    }
}
