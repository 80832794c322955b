/// How a run stands (`reconcile_runs.status`).
package enum RunStatus: String, Sendable, Codable, CaseIterable {
    case running
    /// Everything in the window was recovered.
    case succeeded
    /// Everything was recovered, but payloads were quarantined (or customers refused by Apple)
    /// for the first time: a person should look. The schedule moves on.
    case succeededWithRejections = "succeeded_with_rejections"
    /// Something retryable failed; rerunning resumes the run.
    case partial
    /// The run stopped: a configuration error or the database; see `failure`.
    case failed
    /// SIGINT or SIGTERM; rerunning resumes the run.
    case interrupted
    /// A scheduled window that left Apple's retention before it could be finished.
    case lost

    /// The window needs no more work: the schedule moves past it.
    package var isFinished: Bool { self == .succeeded || self == .succeededWithRejections || self == .lost }
}
