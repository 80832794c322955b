/// Where a run is (`reconcile_runs.phase`): replaying notifications, filling the gaps per customer, done.
package enum RunPhase: String, Sendable, Codable {
    case replay
    case gapFill = "gap_fill"
    case done
}
