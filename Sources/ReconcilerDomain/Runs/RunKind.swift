/// Why a run exists; only scheduled runs form the schedule's chain of windows.
package enum RunKind: String, Sendable, Codable, CaseIterable {
    /// `run --start T --end T`.
    case manual
    /// `run --since-last`: the next window of the schedule.
    case scheduled
    /// A window `detect-outage` found (`run --detected`).
    case detected
    /// One customer, by `reconciler repair`; its window is the notification history it read.
    /// It holds no run lease and never moves the schedule's chain.
    case repair
}
