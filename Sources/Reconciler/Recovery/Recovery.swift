package import AppStoreServer
import Foundation
package import Logging
package import ReconcilerDomain
package import ReconcilerShared
package import ReconcilerStore

/// What `reconciler run` does: recovers the windows of every app and environment given, all at
/// once, each in its own runs, with its own run lease and its own share of its app's request
/// budget (Apple limits each app apart), on one database pool. One big app's recovery does not
/// delay another's (whose consumption requests have 12 hours), and an app whose work is done
/// leaves its share of the budget to the app's other processes at once.
///
/// ```swift
/// let recovery = Recovery(configuration: .init(windows: .window(window), template: template), targets: targets, database: database)
/// let outcomes = await recovery.recover { scope in RunProgress() }
/// ```
///
/// Each target's windows run one after the other (a schedule retries its unfinished windows
/// before the newest); its forwarder delivers beside them and is drained at the end. Nothing is
/// printed here: the outcomes, in the targets' order, say what each did and how it ended.
package struct Recovery: Sendable {
    /// Which windows each target recovers.
    package enum Windows: Sendable {
        /// One window (`--start`, `--end`).
        case window(TimeWindow)
        /// The schedule (``ScheduleChain``): the unfinished scheduled windows, then from where the
        /// chain ended, minus `overlap`, to now.
        case sinceLast(overlap: Duration)
        /// The windows of failed deliveries Apple reports in the last `since` (``OutageDetector``).
        case detected(since: Duration)
    }

    package struct Configuration: Sendable {
        package var windows: Windows
        /// Every run's options; each target's runs get their window, kind and forwarding target.
        package var template: ReconcileRun.Configuration
        /// How long a target waits at its end for its runs' deliveries.
        package var forwardDrainTimeout: Duration
        /// The pool's size: with several targets, each run's concurrency is scaled down so that
        /// all of them fit (``scaled(_:targets:forwarders:)``).
        package var maximumConnections: Int
        /// Where the terms of non-renewing subscriptions are set (``UnknownEntitlement/setting(configurationFile:)``):
        /// each report says how many purchases have an unknown `entitled`, and this setting, so a
        /// `null` never goes unexplained. `nil`: the reports do not count them.
        package var unknownEntitlementSetting: String?

        package init(
            windows: Windows, template: ReconcileRun.Configuration, forwardDrainTimeout: Duration = .seconds(60),
            maximumConnections: Int = .max, unknownEntitlementSetting: String? = nil
        ) {
            self.windows = windows
            self.template = template
            self.forwardDrainTimeout = forwardDrainTimeout
            self.maximumConnections = maximumConnections
            self.unknownEntitlementSetting = unknownEntitlementSetting
        }

        /// Why a pool of `maximumConnections` could starve a run of `replayConcurrency` shards and
        /// `gapConcurrency` customers at once (`nil`: it cannot). Every shard and customer worked on
        /// at once holds a connection for its short transactions, the run lease and bookkeeping need
        /// theirs, and the shared budget listens on one: fewer connections could starve the lease.
        /// A forwarder needs one more.
        package static func connectionShortfall(
            maximumConnections: Int, replayConcurrency: Int, gapConcurrency: Int, forwards: Bool
        ) -> String? {
            let needed = replayConcurrency + gapConcurrency + 3 + (forwards ? 1 : 0)
            guard maximumConnections < needed else { return nil }
            return """
                --max-connections \(maximumConnections) could starve this run: it works on --concurrency \(Plural.count(replayConcurrency, "shard")) and \
                --gap-concurrency \(Plural.count(gapConcurrency, "customer")) at once, plus its lease, its bookkeeping, the shared budget\(forwards ? " and the forwarder" : ""), so it needs \(needed); \
                set --max-connections \(needed) or more, or lower --concurrency / --gap-concurrency
                """
        }
    }

    /// One app in one environment, ready to call Apple.
    package struct Target: Sendable {
        package var scope: AppScope
        package var verifier: SignedDataVerifier
        package var client: AppStoreServerAPIClient
        /// The endpoints this target's runs call, each with the app's budget and this process's
        /// cap: the share is taken when the target's work starts and given back when it ends.
        package var budget: SharedBudget.Configuration?
        /// Delivers the notifications its runs record to the app's own webhooks.
        package var forwarder: (any RunForwarding)?
        /// The webhooks its runs queue deliveries for, each with the types it takes.
        package var forwardRoutes: [ForwardingRoute]
        /// Where its settings came from: what ends its recovery names them so (Apple's 401 names
        /// the file's keys, or the variables).
        package var origins: SettingOrigins

        package init(
            scope: AppScope, origins: SettingOrigins, verifier: SignedDataVerifier, client: AppStoreServerAPIClient,
            budget: SharedBudget.Configuration? = nil, forwarder: (any RunForwarding)? = nil, forwardRoutes: [ForwardingRoute] = []
        ) {
            self.scope = scope
            self.origins = origins
            self.verifier = verifier
            self.client = client
            self.budget = budget
            self.forwarder = forwarder
            self.forwardRoutes = forwardRoutes
        }
    }

    /// A window a target's run is about to recover, told before the run's first request, so the
    /// operator sees what a typo in a time would recover before it is recovered.
    package struct WindowStart: Sendable {
        package var scope: AppScope
        package var window: TimeWindow
        package var kind: RunRecord.Kind
        package var dryRun: Bool
    }

    package let configuration: Configuration
    package let targets: [Target]
    let database: Database
    let logger: Logger

    package init(configuration: Configuration, targets: [Target], database: Database, logger: Logger? = nil) {
        self.configuration = configuration
        self.targets = targets
        self.database = database
        self.logger = logger ?? database.logger
    }

    /// Recovers every target at once; returns their outcomes in the targets' order.
    /// - Parameters:
    ///   - progress: where each target's runs count their progress.
    ///   - starting: told of each window (of every target, each retried scheduled window too) once
    ///     it is checked and before its run's first request; the command prints it at once.
    package func recover(
        progress: @escaping @Sendable (AppScope) -> RunProgress, starting: @escaping @Sendable (WindowStart) -> Void = { _ in }
    ) async -> [RecoveryOutcome] {
        let template = Self.scaled(
            configuration.template, targets: targets.count, forwarders: targets.reduce(0) { $0 + ($1.forwarder?.connections ?? 0) },
            maximumConnections: configuration.maximumConnections)
        if template.replayConcurrency != configuration.template.replayConcurrency
            || template.gapConcurrency != configuration.template.gapConcurrency
        {
            logger.notice(
                "each app's runs work on fewer shards and customers at once, so that every app and environment fits the pool",
                metadata: [
                    "apps": "\(targets.count)", "maxConnections": "\(configuration.maximumConnections)",
                    "concurrency": "\(template.replayConcurrency)", "gapConcurrency": "\(template.gapConcurrency)",
                ])
        }
        let several = targets.count > 1
        return await withTaskGroup(of: (Int, RecoveryOutcome).self) { group in
            for (index, target) in targets.enumerated() {
                var targetLogger = logger
                if several {
                    targetLogger[metadataKey: "app"] = "\(target.scope.bundleId)"
                    targetLogger[metadataKey: "environment"] = "\(target.scope.environment.rawValue)"
                }
                let work = TargetRecovery(
                    target: target, windows: configuration.windows, template: template,
                    forwardDrainTimeout: configuration.forwardDrainTimeout, database: database, logger: targetLogger, starting: starting)
                group.addTask { (index, await work.recover(progress: progress(target.scope))) }
            }
            var outcomes: [RecoveryOutcome?] = Array(repeating: nil, count: targets.count)
            for await (index, outcome) in group { outcomes[index] = outcome }
            return await countUnknownEntitlements(outcomes.compactMap { $0 })
        }
    }

    /// Adds to each report how many purchases of its app and environment have an unknown `entitled`.
    private func countUnknownEntitlements(_ outcomes: [RecoveryOutcome]) async -> [RecoveryOutcome] {
        guard let setting = configuration.unknownEntitlementSetting else { return outcomes }
        var outcomes = outcomes
        for index in outcomes.indices where !outcomes[index].reports.isEmpty {
            let unknown = try? await UnknownEntitlement.count(of: outcomes[index].scope, setting: setting, in: database)
            for report in outcomes[index].reports.indices { outcomes[index].reports[report].unknownEntitlement = unknown }
        }
        return outcomes
    }

    /// The run options each of `targets` runs at once get: the shards and customers worked on at
    /// once, scaled down from the template's (never below one each) so that every run, with its
    /// lease and bookkeeping, and every forwarder fit `maximumConnections`. One target keeps the
    /// template's: its command checked them against the pool.
    package static func scaled(
        _ template: ReconcileRun.Configuration, targets: Int, forwarders: Int, maximumConnections: Int
    ) -> ReconcileRun.Configuration {
        guard targets > 1 else { return template }
        let perRun = template.replayConcurrency + template.gapConcurrency
        // Each run's lease and bookkeeping, each forwarder, and the shared budgets' bookkeeping.
        let available = maximumConnections - targets * 2 - forwarders - 1
        guard targets * perRun > available else { return template }
        var scaled = template
        let each = max(2, available / targets)
        scaled.replayConcurrency = max(1, each * template.replayConcurrency / perRun)
        scaled.gapConcurrency = max(1, each - scaled.replayConcurrency)
        return scaled
    }
}

/// One target's part of a ``Recovery``: its budget share, its windows, its forwarder.
struct TargetRecovery: Sendable {
    let target: Recovery.Target
    let windows: Recovery.Windows
    let template: ReconcileRun.Configuration
    let forwardDrainTimeout: Duration
    let database: Database
    let logger: Logger
    let starting: @Sendable (Recovery.WindowStart) -> Void

    func recover(progress: RunProgress) async -> RecoveryOutcome {
        var outcome = RecoveryOutcome(scope: target.scope)
        do {
            try await sharingTheBudget {
                if let forwarder = target.forwarder {
                    let windowsDone = Locked(false)
                    outcome = await withTaskGroup(of: Void.self) { group in
                        group.addTask { await forwarder.run(until: { windowsDone.withLock { $0 } || Task.isCancelled }) }
                        defer { windowsDone.withLock { $0 = true } }
                        return await recoverWindows(progress: progress)
                    }
                    if !Task.isCancelled { await drain(forwarder, into: &outcome) }
                } else {
                    outcome = await recoverWindows(progress: progress)
                }
            }
        } catch {
            outcome.stop = outcome.stop ?? Self.stop(error, origins: target.origins)
        }
        return outcome
    }

    /// Runs `work` holding this target's share of its app's budget: taken before the first
    /// request, given back as soon as the work ends, so the app's other processes get it back.
    private func sharingTheBudget(_ work: () async throws -> Void) async throws {
        guard let configuration = target.budget else { return try await work() }
        let budget = SharedBudget(
            configuration: configuration, database: database, limiter: target.client.rateLimiter, app: target.scope.target)
        do {
            try await budget.join()
        } catch let error where !(error is CancellationError) {
            // Without a lease the others do not count this process: it must not call Apple.
            logger.error("could not join the request budget shared with the app's other processes", metadata: ["error": "\(error)"])
            throw error
        }
        try await budget.keepingShared(work)
    }

    /// Waits for the deliveries the runs queued, and adds where they stand to the reports.
    private func drain(_ forwarder: any RunForwarding, into outcome: inout RecoveryOutcome) async {
        let runIds = outcome.reports.map(\.runId)
        guard !runIds.isEmpty else { return }
        do {
            outcome.forwarded = try await forwarder.drain(runIdsAndEarlier: runIds, upTo: forwardDrainTimeout)
            for index in outcome.reports.indices {
                outcome.reports[index].forwarding = try await forwarder.summary(runIds: [outcome.reports[index].runId])
            }
        } catch let error as ReconcilerError {
            outcome.stop = outcome.stop ?? error
        } catch {
            // The deliveries stay queued; the next run or `reconciler forward` sends them.
            logger.warning("could not finish forwarding; the deliveries stay queued", metadata: ["error": "\(error)"])
        }
    }

    private func recoverWindows(progress: RunProgress) async -> RecoveryOutcome {
        var outcome = RecoveryOutcome(scope: target.scope)
        var template = self.template
        template.options.forwardRoutes = target.forwardRoutes
        do {
            switch windows {
            case .sinceLast(let overlap):
                try await runSchedule(template, overlap: overlap, progress: progress, into: &outcome)
            case .detected(let since):
                let detection = try await OutageDetector(client: target.client).detect(in: TimeWindow(start: .now - since, end: .now))
                for window in detection.windows {
                    logger.info("detected outage window", metadata: ["window": "\(window.window)", "failed": "\(window.notifications)"])
                }
                for window in detection.windows.map(\.window) {
                    var configuration = template
                    (configuration.window, configuration.kind) = (window, .detected)
                    try await execute(configuration, progress: progress, into: &outcome)
                }
            case .window(let window):
                var configuration = template
                configuration.window = window
                try await execute(configuration, progress: progress, into: &outcome)
            }
        } catch {
            outcome.stop = Self.stop(error, origins: target.origins)
        }
        return outcome
    }

    /// The schedule (``ScheduleChain``): retry every unfinished scheduled window in its own window
    /// (the core gives up those that left Apple's retention), then always recover from where the
    /// chain ended, minus the overlap, to now, so a window that stays unfinished never freezes the
    /// schedule.
    private func runSchedule(
        _ template: ReconcileRun.Configuration, overlap: Duration, progress: RunProgress, into outcome: inout RecoveryOutcome
    ) async throws {
        let app = target.scope.target
        let retention = ReconcileRun.retention(app.environment)
        let now = Timestamp.now
        let plan = try await ScheduleChain.prepare(app, overlap: overlap, dryRun: template.dryRun, database: database, now: now)
        for lost in plan.lost {
            logger.error(
                "a scheduled window left Apple's notification history retention before it was finished; it is lost",
                metadata: ["runId": "\(lost.runId)", "window": "\(lost.window)"])
            outcome.notices.append(
                "LOST: scheduled run \(lost.runId) (\(lost.window.start) → \(lost.window.end)) "
                    + "left Apple's retention unfinished; `reconciler run --start now-\(retention.days - 1)d --all` "
                    + "checks every customer's transaction history")
            outcome.lost.append(lost)
        }
        for unfinished in plan.nearingRetentionEdge {
            let daysLeft = max(0, (unfinished.window.start + retention - now).days)
            logger.warning(
                "an unfinished scheduled window nears the edge of Apple's retention",
                metadata: ["runId": "\(unfinished.runId)", "daysLeft": "\(daysLeft)"])
            outcome.notices.append(
                "WARNING: scheduled run \(unfinished.runId) (\(unfinished.window.start) → \(unfinished.window.end)) is unfinished "
                    + "and leaves Apple's retention in \(Plural.count(daysLeft, "day")); `reconciler rejections` lists what holds it")
        }
        for unfinished in plan.retry {
            // Each unfinished window again, as it was planned; what it cannot finish is reported, and the schedule goes on.
            logger.info(
                "retrying an unfinished scheduled window before the newest one",
                metadata: ["runId": "\(unfinished.runId)", "window": "\(unfinished.window)", "status": "\(unfinished.status.rawValue)"])
            var configuration = template
            (configuration.window, configuration.kind) = (unfinished.window, .scheduled)
            configuration.options = unfinished.options
            if !template.options.forwardRoutes.isEmpty { configuration.options.forwardRoutes = template.options.forwardRoutes }
            try await execute(configuration, progress: progress, into: &outcome)
        }
        let (next, origin) = (plan.next, plan.origin)
        if origin == .firstWindow {
            logger.notice("the schedule's first window: no earlier run and no live notification yet", metadata: ["app": "\(app)"])
            outcome.notices.append(
                "first scheduled window for \(app): nothing recorded yet, so it starts \(overlap.operatorText) ago; "
                    + "recover anything earlier with `reconciler run --start T \(app.choosingOptions)`"
            )
        }
        if plan.clippedToRetention {
            logger.error(
                "the schedule's next window starts before Apple's retention; the part before it cannot be replayed",
                metadata: ["servedFrom": "\(next.start)"])
        }
        logger.info("window from --since-last", metadata: ["start": "\(next.start)", "end": "\(next.end)", "from": "\(origin.rawValue)"])
        var configuration = template
        (configuration.window, configuration.kind) = (next, .scheduled)
        let ledger = RunLedger(database: database)
        try await execute(configuration, progress: progress, into: &outcome) { report in
            // The newest report says which windows of the chain are still unfinished (this one included).
            report.unfinishedScheduledWindows = try await ledger.unfinishedScheduledRuns(app: app).map {
                .init(runId: $0.runId, window: $0.window, status: $0.status)
            }
        }
    }

    /// Runs one window; a stop that ends this target's recovery is thrown, with the report of the
    /// run that stopped kept in the outcome.
    private func execute(
        _ configuration: ReconcileRun.Configuration, progress: RunProgress, into outcome: inout RecoveryOutcome,
        completing complete: ((inout RunReport) async throws -> Void)? = nil
    ) async throws {
        // A window Apple's limits refuse is refused before it is announced.
        try ReconcileRun.validate(configuration.window, environment: target.scope.environment)
        starting(.init(scope: target.scope, window: configuration.window, kind: configuration.kind, dryRun: configuration.dryRun))
        let run = ReconcileRun(
            configuration: configuration, scope: target.scope, database: database, verifier: target.verifier, client: target.client)
        do {
            var report = try await run.reconcile(
                progress: progress, onWait: { logger.notice("another run holds the lease; waiting (--wait)") },
                stopped: { outcome.reports.append($0) })
            try await complete?(&report)
            outcome.reports.append(report)
        } catch let error as ReconcilerError where error.code == .leaseHeld {
            outcome.leaseHeld = true
            throw error
        }
    }

    /// What ends a target's recovery, as it ends the command (``ReconcilerError/init(endingCommandWith:)``),
    /// naming the settings a hint asks to check where they were set (`origins`).
    static func stop(_ error: any Error, origins: SettingOrigins) -> ReconcilerError {
        (ReconcilerError(endingCommandWith: error) ?? .partial("the run stopped: \(error); rerun the same command to resume")).naming(origins)
    }
}
