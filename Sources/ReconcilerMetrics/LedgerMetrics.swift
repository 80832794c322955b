package import AppStoreServer
import CoreMetrics
import Foundation
import Logging
import Reconciler
package import ReconcilerDomain
import ReconcilerShared
package import ReconcilerStore
import ServiceLifecycle

/// The gauges alerts watch that live in the database, not in one process: unacknowledged
/// quarantined payloads and given-up customers and shards, the schedule's unfinished windows,
/// when the last run finished, the newest live notification, the app's deliveries in the
/// forwarding queue (per webhook), and the consumption requests still waiting for an answer. `run`
/// reads them once before writing its metrics file; `serve` runs this as a service that reads
/// them at start and then every ``Configuration/interval``, so they stay true while nothing
/// happens in that process (another process ran, `rejections --ack`, another replica stored a
/// notification).
///
/// ```swift
/// let ledgerMetrics = LedgerMetrics(ledger: RunLedger(database: database),
///                                   app: AppTarget(bundleId: "com.example.app", environment: .production), registry: metrics)
/// try await ledgerMetrics.refresh()                                   // once (run)
/// let app = server.makeApplication(services: [client, ledgerMetrics]) // periodically (serve)
/// ```
package struct LedgerMetrics: Service {
    package struct Configuration: Sendable {
        /// Between two reads in ``run()``.
        package var interval: Duration

        package init(interval: Duration = .seconds(60)) {
            self.interval = interval
        }
    }

    package let ledger: RunLedger
    /// The app and environment whose rows the gauges read.
    package let app: AppTarget
    package let registry: MetricsRegistry
    package let configuration: Configuration
    /// Whether the consumption requests the live webhook received count as open.
    package let liveConsumptionRequests: ConsumptionSettings.LiveRequests
    /// The webhooks this process forwards the app's notifications to: their gauges read 0 before
    /// anything is queued for them.
    package let forwardingTargets: [ForwardingTarget]
    /// The moment deadlines are judged at, UNIX ms (a test fixes it).
    package var now: @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970 * 1000) }
    /// The webhooks whose forwarding gauges this instance has set, so one that no longer has rows reads 0.
    private let forwardingLabels = Locked<Set<String>>([])

    package init(
        ledger: RunLedger, app: AppTarget, registry: MetricsRegistry, configuration: Configuration = .init(),
        liveConsumptionRequests: ConsumptionSettings.LiveRequests = .watch,
        forwardingTargets: [ForwardingTarget] = []
    ) {
        self.ledger = ledger
        self.app = app
        self.registry = registry
        self.configuration = configuration
        self.liveConsumptionRequests = liveConsumptionRequests
        self.forwardingTargets = forwardingTargets
    }

    /// Reads the values and sets their gauges; a value the database does not have yet (no
    /// finished run, no live notification) leaves its series absent.
    package func refresh() async throws {
        let quarantined = try await ledger.unacknowledgedQuarantineCount(app: app)
        MetricDefinition.quarantineUnacknowledged.gauge(in: registry).record(quarantined)
        for (kind, count) in try await ledger.unacknowledgedGivenUpCount(app: app) {
            MetricDefinition.givenUpUnacknowledged.gauge([kind.rawValue], in: registry).record(count)
        }
        let unfinished = try await ledger.unfinishedScheduledRuns(app: app)
        MetricDefinition.scheduleUnfinishedWindows.gauge(in: registry).record(unfinished.count)
        MetricDefinition.scheduleOldestUnfinishedWindowStart.gauge(in: registry).record(
            unfinished.first?.window.start.secondsSince1970 ?? 0)
        if let finishedAt = try await ledger.lastFinished(app: app)?.finishedAt {
            MetricDefinition.lastFinishedRun.gauge(in: registry).record(finishedAt.timeIntervalSince1970)
        }
        let store = PurchaseStore(logger: ledger.logger)
        let queue = ForwardQueue(database: ledger.database)
        let (newestLive, forwarding) = try await ledger.database.transaction { transaction in
            (
                try await store.notifications.newestLive(of: app, on: transaction),
                try await queue.forwardingSummaries(of: app, on: transaction)
            )
        }
        if let newestLive {
            registry.newestLiveNotification.advance(to: newestLive.secondsSince1970)
        }
        recordForwarding(forwarding)
        try await refreshConsumptionRequests()
    }

    /// The app's deliveries per webhook, labelled with its redacted URL (webhooks whose redacted
    /// forms are the same add up); a webhook set before or configured reads 0 without rows.
    private func recordForwarding(_ summaries: [ForwardQueue.TargetSummary]) {
        var byLabel: [String: ForwardQueue.ForwardingSummary] = [:]
        for target in forwardingTargets { byLabel[target.redacted] = .init() }
        for (target, summary) in summaries.map({ ($0.target, $0.summary) }) {
            var total = byLabel[target.redacted] ?? .init()
            total.pending += summary.pending
            total.failed += summary.failed
            total.delivered += summary.delivered
            total.oldestPending = [total.oldestPending, summary.oldestPending].compactMap { $0 }.min()
            byLabel[target.redacted] = total
        }
        let labels = forwardingLabels.withLock { seen in
            seen.formUnion(byLabel.keys)
            return seen
        }
        for label in labels {
            let summary = byLabel[label] ?? .init()
            for (status, count) in [("pending", summary.pending), ("failed", summary.failed), ("delivered", summary.delivered)] {
                MetricDefinition.forwardQueueDeliveries.gauge([label, status], in: registry).record(count)
            }
            MetricDefinition.forwardQueueOldestPending.gauge([label], in: registry).record(summary.oldestPending?.timeIntervalSince1970 ?? 0)
        }
    }

    /// Where the time left of an open consumption request falls, ms: under 2 h (the alert's), 2 h to 6 h, over 6 h.
    package static let timeLeftBuckets: [(label: String, from: Int64)] = [("under_2h", 0), ("2h_to_6h", 7_200_000), ("over_6h", 21_600_000)]

    private func refreshConsumptionRequests() async throws {
        let (now, target) = (now(), app)
        let requests = ConsumptionRequests(logger: ledger.logger)
        let bounds = Self.timeLeftBuckets.dropFirst().map(\.from)
        let watchingLive = liveConsumptionRequests == .watch
        let summary = try await ledger.database.transaction { transaction in
            try await requests.openSummary(of: target, at: now, bounds: Array(bounds), watchingLive: watchingLive, on: transaction)
        }
        for (index, bucket) in Self.timeLeftBuckets.enumerated() {
            MetricDefinition.consumptionRequestsOpen.gauge([bucket.label], in: registry).record(Int64(summary.counts[index]))
        }
        MetricDefinition.consumptionRequestNextDeadline.gauge(in: registry).record(summary.soonest.map { Double($0) / 1000 } ?? 0)
    }

    /// Refreshes now and then every ``Configuration/interval`` until graceful shutdown; a failed
    /// read is counted and logged once until a read succeeds again, and the gauges keep their values.
    package func run() async throws {
        let failures = MetricDefinition.ledgerRefreshFailures.counter(in: registry)
        let (interval, logger) = (configuration.interval, ledger.logger)
        await cancelWhenGracefulShutdown {
            var failing = false
            while !Task.isCancelled {
                do {
                    try await refresh()
                    if failing { logger.info("metrics: the ledger gauges are read from the database again") }
                    failing = false
                } catch is CancellationError {
                    return
                } catch {
                    failures.increment()
                    if !failing {
                        logger.warning(
                            "metrics: cannot read the ledger gauges; they keep their last values",
                            metadata: ["error": "\(Database.operatorDescription(of: error))"])
                    }
                    failing = true
                }
                try? await Task.sleep(for: interval)
            }
        }
    }
}
