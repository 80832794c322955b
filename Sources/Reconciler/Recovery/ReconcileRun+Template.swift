package import ReconcilerDomain
package import ReconcilerShared
package import ReconcilerStore

extension ReconcileRun.Configuration {
    /// What `run` gives every window it recovers (each gets its own window, kind and forwarding
    /// target from ``Recovery``), checked before anything runs: a first shard of at least 1s, a
    /// lease of at least 3s (renewed six times in its length), and the typed queries `priority`
    /// names, most urgent first (`DID_RENEW,DID_RENEW/BILLING_RECOVERY,EXPIRED/VOLUNTARY`; `nil`:
    /// the planner's own order).
    package static func template(
        dryRun: Bool, priority: String?, shardDuration: Duration?, maximumShardsPerQuery: Int, allCustomers: Bool, refreshStatus: Bool,
        replayConcurrency: Int, gapConcurrency: Int, leaseDuration: Duration, wait: Bool, fresh: Bool, giveUp: GiveUpPolicy
    ) throws -> ReconcileRun.Configuration {
        var planner = ReplayPlanner.Configuration(maximumShardsPerQuery: maximumShardsPerQuery)
        if let shardDuration {
            guard shardDuration >= .seconds(1) else {
                throw ReconcilerError.configuration("--shard-duration: \(shardDuration.operatorText) is shorter than 1s")
            }
            planner.shardDuration = shardDuration.milliseconds
        }
        if let priority {
            planner.priority = try priority.split(separator: ",").map { item in
                guard let filter = NotificationFilter(parsing: String(item)) else {
                    throw ReconcilerError.configuration("--priority: \(item) is not a notification type or TYPE/SUBTYPE Apple documents")
                }
                return filter
            }
        }
        guard leaseDuration >= .seconds(3) else {
            throw ReconcilerError.configuration("--lease-duration: \(leaseDuration.operatorText) is shorter than 3s")
        }
        return ReconcileRun.Configuration(
            window: TimeWindow(start: .now, end: .now), kind: .manual, dryRun: dryRun,
            options: RunOptions(planner: planner, allCustomers: allCustomers, refreshStatus: refreshStatus),
            replayConcurrency: replayConcurrency, gapConcurrency: gapConcurrency,
            lease: .init(duration: leaseDuration, renewalInterval: max(leaseDuration / 6, .milliseconds(500)), wait: wait), fresh: fresh,
            giveUp: giveUp)
    }
}
