package import Reconciler
package import ReconcilerStore

/// The forwarders of an app and environment with several webhooks (`forwardTo` as a list), as one
/// ``RunForwarding`` for its runs: they deliver side by side, each its own webhook's queue rows,
/// and a drain waits for all of them. A run's summary counts its deliveries to every webhook.
///
/// ```swift
/// let forwarding = Forwarders([Forwarder(configuration: app, database: database), Forwarder(configuration: staging, database: database)])
/// let drain = try await forwarding.drain(runIdsAndEarlier: [runId], upTo: .seconds(60))
/// ```
package struct Forwarders: RunForwarding, Sendable {
    package let forwarders: [Forwarder]

    /// `forwarders` is not empty.
    package init(_ forwarders: [Forwarder]) {
        precondition(!forwarders.isEmpty, "Forwarders of no forwarder")
        self.forwarders = forwarders
    }

    package var connections: Int { forwarders.count }

    /// What delivers a run's notifications to `configurations`' webhooks: none, one forwarder, or
    /// the forwarders of them all.
    package static func forwarding(_ configurations: [Forwarder.Configuration], database: Database) -> (any RunForwarding)? {
        let forwarders = configurations.map { Forwarder(configuration: $0, database: database) }
        return forwarders.count > 1 ? Forwarders(forwarders) : forwarders.first
    }

    package func run(until isStopping: @escaping @Sendable () -> Bool) async {
        await withTaskGroup(of: Void.self) { group in
            for forwarder in forwarders { group.addTask { await forwarder.run(until: isStopping) } }
        }
    }

    /// Each forwarder drains its webhook's deliveries at once; the summaries are of the runs'
    /// deliveries to every webhook.
    package func drain(runIdsAndEarlier runIds: [Int64], upTo time: Duration) async throws -> ForwardingDrain {
        let earlierRuns = try await withThrowingTaskGroup(of: [Int64].self) { group in
            for forwarder in forwarders { group.addTask { try await forwarder.drain(runIdsAndEarlier: runIds, upTo: time).earlierRuns } }
            return try await group.reduce(into: Set<Int64>()) { $0.formUnion($1) }.sorted()
        }
        return ForwardingDrain(
            own: try await summary(runIds: runIds), earlierRuns: earlierRuns,
            earlier: earlierRuns.isEmpty ? .init() : try await summary(runIds: earlierRuns))
    }

    /// Where the deliveries of `runIds` stand, whatever their webhook.
    package func summary(runIds: [Int64]?) async throws -> ForwardQueue.ForwardingSummary {
        try await forwarders[0].summary(runIds: runIds)
    }
}
