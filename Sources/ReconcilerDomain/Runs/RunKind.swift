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
    /// The customers an import file names, by `reconciler import`; its window is the moment it
    /// started. Like a repair it holds no run lease and never moves the schedule's chain.
    case `import`

    /// Whether runs of this kind are about customers, not a window of notification history
    /// (never resumed as a window's run, never shared with `work`).
    package var isAboutCustomers: Bool { self == .repair || self == .import }
}
