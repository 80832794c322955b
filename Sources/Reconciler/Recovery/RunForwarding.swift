package import ReconcilerStore

/// What a recovery needs of the delivery to the app's own webhook (the `Forwarder` module's
/// `Forwarder`): delivering beside the runs, then waiting for what they queued.
package protocol RunForwarding: Sendable {
    /// Delivers what is due until `isStopping` says so.
    func run(until isStopping: @escaping @Sendable () -> Bool) async
    /// Waits up to `time` for the deliveries of `runIds`, and of earlier runs still waiting for the
    /// same webhook; says where both stand.
    func drain(runIdsAndEarlier runIds: [Int64], upTo time: Duration) async throws -> ForwardingDrain
    /// Where the deliveries of `runIds` stand.
    func summary(runIds: [Int64]?) async throws -> ForwardQueue.ForwardingSummary
    /// The pooled connections it may hold at once (one per webhook).
    var connections: Int { get }
}

extension RunForwarding {
    package var connections: Int { 1 }
}

/// Where a drain left the runs it was given and the earlier runs it found waiting.
package struct ForwardingDrain: Sendable {
    package var own: ForwardQueue.ForwardingSummary
    /// Earlier runs whose deliveries for this webhook were still waiting, oldest first.
    package var earlierRuns: [Int64]
    package var earlier: ForwardQueue.ForwardingSummary

    package init(own: ForwardQueue.ForwardingSummary, earlierRuns: [Int64], earlier: ForwardQueue.ForwardingSummary) {
        self.own = own
        self.earlierRuns = earlierRuns
        self.earlier = earlier
    }
}
