/// How a command ended, as the exit codes the README documents; the commands map their errors to
/// these and print, the rule of which one wins lives here.
///
/// ```swift
/// let classes = reports.map { ExitClass(runStatus: $0.status) }
/// exit(ExitClass.mostPressing(classes).map { classes[$0].rawValue } ?? 0)
/// ```
package enum ExitClass: Int32, Sendable, CaseIterable {
    /// Everything was recovered.
    case recovered = 0
    /// The command line or the configuration must change.
    case configuration = 1
    /// The work ran but something was not recovered; rerunning resumes it.
    case retryable = 2
    /// A signed value is not genuine.
    case rejected = 3
    /// Done, but something needs a person (payloads quarantined for the first time, requests Apple
    /// refused, a window lost to retention); not a retry.
    case attention = 4

    /// The order in which outcomes press: configuration over retryable over attention (a person
    /// must fix the first before a rerun can help; a rerun comes before a look).
    static let precedence: [ExitClass] = [.configuration, .retryable, .attention]

    /// The index of the most pressing of several outcomes (one per app and environment, or per
    /// window); `nil` when none is a configuration, retryable or attention outcome.
    package static func mostPressing(_ classes: [ExitClass]) -> Int? {
        for pressing in precedence {
            if let index = classes.firstIndex(of: pressing) { return index }
        }
        return nil
    }

    /// ``mostPressing(_:)-([ExitClass])`` of exit codes; a code of no class never wins.
    package static func mostPressing(_ exitCodes: [Int32]) -> Int? {
        mostPressing(exitCodes.map { ExitClass(rawValue: $0) ?? .recovered })
    }
}
