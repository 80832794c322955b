import AppStoreServer
import ArgumentParser
import CoreMetrics
import Forwarder
import Foundation
import Logging
import Reconciler
import ReconcilerConfiguration
import ReconcilerDomain
import ReconcilerMetrics
import ReconcilerShared
import ReconcilerStore
import ServiceLifecycle

struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Recover an outage window: replay missed notifications, then fill the gaps per customer.",
        discussion: """
            Phase 1 pages Get Notification History over the window, urgent types first (DID_RENEW and EXPIRED \
            before the rest), then one unfiltered sweep that catches everything else; every notification goes \
            through the same verified handler as the live webhook. Each query starts as one shard over the whole \
            window (a query that finds nothing costs one request); a dense shard splits for idle workers while it is \
            paged. Phase 2 fetches Get Transaction History from each at-risk customer's stored revision. Ctrl-C, a \
            crash or SIGKILL loses nothing: rerunning the same window resumes from the last checkpoint.

            --since-last is for a schedule (cron, a CronJob): it first retries every unfinished scheduled window, \
            each in its own window, then always recovers from where the newest scheduled window ended (minus \
            --overlap) to now, so one window that stays unfinished never freezes the schedule. A customer or shard \
            that fails in --give-up-after attempts of its run in a row (or that Apple refuses) is given up and \
            listed by `reconciler rejections`, so its window can finish. A signed value that fails verification is \
            quarantined (`reconciler rejections`), never applied, and does not hold the schedule back.

            T is ISO 8601 (2026-11-20T03:10:00Z), UNIX milliseconds, or now-6h.
            Exit codes: 0 everything was recovered; 4 done, but something needs a person (payloads quarantined for \
            the first time, requests Apple refused, a window lost to retention); 2 partial or interrupted (rerun to \
            resume); 1 usage or configuration error, or another run holds the lease.

              reconciler run --start 2026-11-20T03:10:00Z --end 2026-11-20T05:45:00Z --dry-run
              reconciler run --start 2026-11-20T03:10:00Z --end 2026-11-20T05:45:00Z --report-json report.json
              reconciler run --start 2026-11-20T03:10:00Z --end 2026-11-20T05:45:00Z --report-html incident.html
              reconciler run --since-last --metrics-file /var/lib/node_exporter/reconciler.prom
            """)

    @Option(help: ArgumentHelp("Start of the window (ISO 8601, UNIX ms, or now-6h).", valueName: "T")) var start: Timestamp?
    @Option(help: ArgumentHelp("End of the window (default now).", valueName: "T")) var end: Timestamp?
    @Flag(help: "The schedule's next window: retry the unfinished scheduled windows, then recover from the chain's end minus --overlap to now.")
    var sinceLast = false
    @Option(
        help: ArgumentHelp(
            "Give up a customer or shard that failed in this many attempts of its run in a row (default 6, env RECONCILER_GIVE_UP_AFTER).",
            valueName: "n"))
    var giveUpAfter: Int?
    @Option(help: ArgumentHelp("Overlap for --since-last (default 1h).", valueName: "duration")) var overlap: Duration = .hours(1)
    @Flag(help: "Recover the windows `detect-outage` finds (failed deliveries in the last --detect-since).") var detected = false
    @Option(help: ArgumentHelp("How far back --detected looks (default 7d).", valueName: "duration")) var detectSince: Duration = .days(7)
    @Flag(help: "Change nothing; report exactly what a real run would change.") var dryRun = false
    @Flag(help: "Phase 2 checks every known customer, not only those at risk.") var all = false
    @Flag(help: "Phase 2 also calls Get All Subscription Statuses for each customer.") var refreshStatus = false
    @Option(
        help: ArgumentHelp(
            "Typed queries before the sweep, most urgent first, e.g. DID_RENEW,DID_RENEW/BILLING_RECOVERY,EXPIRED/VOLUNTARY.", valueName: "list"))
    var priority: String?
    @Option(
        help: ArgumentHelp(
            "Cut each query into time shards of this length up front (default: one shard per query over the whole window); a dense shard splits further while it is paged.",
            valueName: "duration"))
    var shardDuration: Duration?
    @Option(help: ArgumentHelp("With --shard-duration: the most shards a query starts with (default 48).", valueName: "n")) var maxShards: Int = 48
    @Option(help: ArgumentHelp("Shards paged at once in phase 1 (default 8).", valueName: "n")) var concurrency: Int = 8
    @Option(help: ArgumentHelp("Customers processed at once in phase 2 (default 8).", valueName: "n")) var gapConcurrency: Int = 8
    @Flag(help: "Wait for another run of this app and environment to finish instead of exiting.") var wait = false
    @Flag(help: "Start a new run even if an unfinished one exists for this window.") var fresh = false
    @Option(help: ArgumentHelp("Also write the report as JSON to this file (with several windows, the last).", valueName: "path")) var reportJson:
        String?
    @Option(
        help: ArgumentHelp(
            "Also write the incident report page, one self-contained HTML file, to this file (also for a partial or interrupted run; with several windows, the last).",
            valueName: "path"))
    var reportHtml: String?
    @Option(
        help: ArgumentHelp(
            "Write Prometheus metrics (node_exporter textfile format) to this file, atomically, whatever the outcome "
                + "(not when another run holds the lease: that run writes it).", valueName: "path"))
    var metricsFile: String?
    @Option(help: ArgumentHelp("Seconds between progress log lines when not on a terminal (default 10).", valueName: "s")) var progressInterval: Int =
        10
    @Option(
        help: ArgumentHelp(
            "How long the run lease lasts without renewal; a killed run's window can be taken over after it (default 30s).",
            valueName: "duration"))
    var leaseDuration: Duration = .seconds(30)
    @Option(
        help: ArgumentHelp(
            """
            Deliver each notification this run records that Apple did not deliver to this webhook, as Apple's exact body, for every app         (env RECONCILER_FORWARD_TO); without it, to each app's forwardTo (never both).
            """, valueName: "url"))
    var forwardTo: String?
    @Option(
        help: ArgumentHelp(
            """
            How long the run waits at its end for its deliveries (default 60s); the rest is delivered by the next run,         `serve --forward-to` or `reconciler forward`.
            """, valueName: "duration"))
    var forwardDrainTimeout: Duration = .seconds(60)

    @OptionGroup var app: AppOptions
    @OptionGroup var api: APIOptions
    @OptionGroup var database: DatabaseOptions
    @OptionGroup(title: "Forwarding") var forwarding: ForwardingOptions
    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        let windowForms = [start != nil || end != nil, sinceLast, detected].filter { $0 }.count
        guard windowForms == 1 else {
            throw ValidationError("give the window as --start T [--end T], or --since-last, or --detected")
        }
        if end != nil, start == nil { throw ValidationError("--end needs --start") }
        if let reportHtml { try ReportPageFile.validate(reportHtml, option: "--report-html") }
        if let metricsFile {
            let directory = URL(fileURLWithPath: metricsFile).deletingLastPathComponent().path
            guard FileManager.default.isWritableFile(atPath: directory) else {
                throw ValidationError(
                    "--metrics-file \(metricsFile): the directory \(directory) does not exist or is not writable (the file is written beside, then renamed)"
                )
            }
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: metricsFile, isDirectory: &isDirectory), isDirectory.boolValue {
                throw ValidationError("--metrics-file \(metricsFile) is a directory; give a file name such as reconciler.prom")
            }
        }
        guard concurrency >= 1, gapConcurrency >= 1, maxShards >= 1 else { throw ValidationError("concurrency and --max-shards must be at least 1") }
        _ = try GiveUpOption.policy(giveUpAfter)
        // Every shard and customer worked on at once holds a connection for its short transactions,
        // the run lease and bookkeeping need theirs, and the shared budget listens on one: fewer
        // connections could starve the lease. The forwarder needs one more.
        let forwards = forwardTo != nil || Env.value("RECONCILER_FORWARD_TO") != nil
        let needed = concurrency + gapConcurrency + 3 + (forwards ? 1 : 0)
        guard database.maxConnections >= needed else {
            throw ValidationError(
                """
                --max-connections \(database.maxConnections) could starve this run: it works on --concurrency \(concurrency) shards and \
                --gap-concurrency \(gapConcurrency) customers at once, plus its lease, its bookkeeping, the shared budget\(forwards ? " and the forwarder" : ""), so it needs \(needed); \
                set --max-connections \(needed) or more, or lower --concurrency / --gap-concurrency
                """)
        }
    }

    func run() async throws {
        let logger = logging.makeLogger()
        // One registry for the process, rendered into --metrics-file whatever the outcome; each app
        // and environment's series carry its own labels (``MetricsRegistry/scoped(environment:bundleId:)``).
        let metrics = metricsFile.map { _ in
            MetricsRegistry(environment: (try? app.resolvedEnvironment)?.rawValue ?? "", bundleId: app.resolvedBundleId ?? "")
        }
        if let metrics { MetricsSystem.bootstrap(metrics.factory) }
        let outcomes: [Outcome]
        do {
            outcomes = try await invoke(metrics: metrics, logger: logger)
        } catch {
            // Stopped before any run could report (configuration, the database): alerts still see the exit code.
            do {
                if let metrics {
                    RunMetrics.record(exitCode: (error as? ReconcilerError)?.exitCode ?? 1, kind: invocationKind, report: nil, in: metrics)
                }
                try writeMetrics(metrics)
            } catch let metricsError {
                logger.error("\(metricsError)")
            }
            throw error
        }
        let several = outcomes.count > 1
        for outcome in outcomes {
            // Another run holds the lease: the file keeps what that run (the one doing the work) writes.
            if let metrics, !outcome.leaseHeld {
                RunMetrics.record(
                    exitCode: outcome.exitCode, kind: invocationKind, report: outcome.reports.last,
                    in: metrics.scoped(environment: outcome.target.environment.rawValue, bundleId: outcome.target.bundleId))
            }
            if outcome.reports.isEmpty, outcome.stop == nil, outcome.lost.isEmpty {
                print("\(several ? "\(outcome.target): " : "")no failed deliveries found: nothing to recover")
            }
            if several, let stop = outcome.stop { print("\(outcome.target): \(stop.description)") }
        }
        try writeMetrics(metrics)
        if several, let reportJson { try write(outcomes, toJSON: reportJson) }
        // The worst of the apps and environments decides the exit code.
        guard let worst = Outcome.worst(outcomes, several: several) else { return }
        if let stop = worst.stop { throw stop }
        throw worst.error
    }

    /// Every configured app and environment (or the one `--app` and `--environment` choose), one
    /// after the other in one process and database pool, each in its own runs with its own lease
    /// and its own share of its app's budget: a 401 or an outage of one does not stop the others.
    private func invoke(metrics: MetricsRegistry?, logger: Logger) async throws -> [Outcome] {
        let loaded = try app.loadTargets(api: api)
        let targets = loaded.targets
        let template = try runTemplate(giveUpAfterInFile: loaded.configuration.giveUpAfter)
        // Each app's recovered notifications go to its own webhook (`forwardTo` in the file), or all to
        // --forward-to, each signed with its secret: checked before anything starts, also in a dry run.
        let forwardingPlan = try forwarding.plan(forwardTo: forwardTo, configuration: loaded.configuration, targets: targets.map(\.configuration))
        let forwarderConfigurations = try forwarding.configurations(for: forwardingPlan)
        let forwardURLs = targets.map { forwardingPlan.webhook(for: $0.app)?.url }
        let forwarders = forwardURLs.map { url in dryRun ? nil : forwarderConfigurations.first { $0.url.target.id == url?.target.id } }
        let several = targets.count > 1
        // With several apps and environments, the JSON report and the page cover all of them (below).
        var perTarget = self
        if several { (perTarget.reportJson, perTarget.reportHtml) = (nil, nil) }
        let command = perTarget
        do {
            // SIGINT or SIGTERM stop the work at a checkpoint (exit 2); see CommandLifecycle.
            // Phase 1 pages the notification history, phase 2 the customers' transaction history and
            // statuses (a resumed run keeps the --refresh-status it started with).
            let sharing = targets.map { $0.sharing([.getNotificationHistory, .getTransactionHistory, .getAllSubscriptionStatuses]) }
            return try await database.runWork(logger: logger, sharing: sharing) { database in
                try await command.requireSchema(database)
                var outcomes: [Outcome] = []
                for (index, target) in targets.enumerated() {
                    if Task.isShuttingDownGracefully || Task.isCancelled { break }
                    var targetLogger = logger
                    if several {
                        targetLogger[metadataKey: "app"] = "\(target.app.bundleId)"
                        targetLogger[metadataKey: "environment"] = "\(target.app.environment.rawValue)"
                        print("== \(target.app)")
                    }
                    var configuration = template
                    configuration.options.forwardTo = forwardURLs[index]?.target
                    let targetDatabase = database.with(entitlement: target.configuration.entitlement)
                    outcomes.append(
                        try await command.recover(
                            target: target, database: targetDatabase, template: configuration,
                            forwarder: forwarders[index].map { Forwarder(configuration: $0, database: targetDatabase) },
                            metrics: metrics?.scoped(environment: target.app.environment.rawValue, bundleId: target.app.bundleId),
                            logger: targetLogger))
                }
                // The page shows the most pressing app's run (the JSON report lists each); a page
                // that cannot be written is a configuration error, as with one app.
                if several, let reportHtml, let index = Outcome.worstIndex(outcomes, several: several) ?? outcomes.indices.last,
                    let report = outcomes[index].reports.last
                {
                    do {
                        try await ReportPageFile.write(report: report, ledger: RunLedger(database: database), to: reportHtml, logger: logger)
                    } catch {
                        let stop = (error as? ReconcilerError) ?? .configuration("cannot write the report page to \(reportHtml): \(error)")
                        outcomes[index].stop = outcomes[index].stop ?? stop
                    }
                }
                return outcomes
            }
        } catch is Interrupted {
            throw ReconcilerError.partial("interrupted before the run started; rerun the same command")
        }
    }

    /// The kind of run this invocation makes, for the metrics of one that stopped before any run.
    private var invocationKind: RunRecord.Kind { sinceLast ? .scheduled : detected ? .detected : .manual }

    private func writeMetrics(_ metrics: MetricsRegistry?) throws {
        guard let metrics, let metricsFile else { return }
        do {
            try metrics.writeTextfile(to: metricsFile)
        } catch {
            throw ReconcilerError.configuration("\(error)")
        }
    }

    /// Every window of this invocation, in order, with the forwarder delivering beside them (a slow
    /// app backs up the queue, not the run), then draining what they queued; what stops the
    /// invocation is kept in the outcome.
    private func recover(
        target: CommandTarget, database: Database, template: ReconcileRun.Configuration, forwarder: Forwarder?, metrics: MetricsRegistry?,
        logger: Logger
    ) async throws -> Outcome {
        var outcome: Outcome
        if let forwarder {
            let windowsDone = Locked(false)
            outcome = try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await forwarder.run(until: { windowsDone.withLock { $0 } || Task.isShuttingDownGracefully }) }
                defer { windowsDone.withLock { $0 = true } }
                return try await recoverWindows(target: target, database: database, template: template, logger: logger)
            }
            if !Task.isShuttingDownGracefully, !Task.isCancelled {
                do {
                    try await drain(forwarder, into: &outcome)
                } catch let error as ReconcilerError {
                    outcome.stop = outcome.stop ?? error
                } catch {
                    // The deliveries stay queued; the next run or `reconciler forward` sends them.
                    logger.warning("could not finish forwarding; the deliveries stay queued", metadata: ["error": "\(error)"])
                }
            }
        } else {
            outcome = try await recoverWindows(target: target, database: database, template: template, logger: logger)
        }
        await conclude(&outcome, database: database, target: target.app, metrics: metrics, logger: logger)
        return outcome
    }

    /// Waits up to --forward-drain-timeout for the runs' deliveries, and for those earlier runs
    /// left for this webhook (``Forwarder/drain(runIdsAndEarlier:upTo:)``), and adds where the
    /// runs' stand to their reports.
    private func drain(_ forwarder: Forwarder, into outcome: inout Outcome) async throws {
        let runIds = outcome.reports.map(\.runId)
        guard !runIds.isEmpty else { return }
        let drained = try await forwarder.drain(runIdsAndEarlier: runIds, upTo: forwardDrainTimeout)
        for index in outcome.reports.indices {
            outcome.reports[index].forwarding = try await forwarder.summary(runIds: [outcome.reports[index].runId])
        }
        print(Self.forwardedLine("\(drained.own.delivered) notifications delivered to the app's webhook", drained.own))
        if !drained.earlierRuns.isEmpty {
            let runs = drained.earlierRuns.map(String.init).joined(separator: ", ")
            let label = "earlier runs' deliveries (run\(drained.earlierRuns.count == 1 ? "" : "s") \(runs))"
            print(Self.forwardedLine("\(label): \(drained.earlier.delivered) delivered", drained.earlier))
        }
        if let reportJson, let report = outcome.reports.last { try write(report, toJSON: reportJson) }
    }

    /// `forwarded    <what was delivered>, N pending, N failed`, and what to do about the rest.
    static func forwardedLine(_ delivered: String, _ summary: ForwardQueue.ForwardingSummary) -> String {
        "forwarded    \(delivered), \(summary.pending) pending, \(summary.failed) failed"
            + (summary.pending > 0 ? "; `reconciler forward` or the next run delivers the rest" : "")
            + (summary.failed > 0 ? "; `reconciler forward --retry-failed` tries the failed ones again" : "")
    }

    private func recoverWindows(
        target: CommandTarget, database: Database, template: ReconcileRun.Configuration, logger: Logger
    ) async throws -> Outcome {
        let (verifier, client) = (target.verifier, target.client)
        let ledger = RunLedger(database: database)
        var outcome = Outcome(target: target.app)
        do {
            if sinceLast {
                try await runSchedule(
                    template, database: database, verifier: verifier, client: client, ledger: ledger, logger: logger,
                    into: &outcome)
            } else if detected {
                for window in try await detectedWindows(client: client, logger: logger) {
                    var configuration = template
                    (configuration.window, configuration.kind) = (window, .detected)
                    try await execute(configuration, database: database, verifier: verifier, client: client, logger: logger, into: &outcome)
                }
            } else {
                var configuration = template
                configuration.window = manualWindow()
                try await execute(configuration, database: database, verifier: verifier, client: client, logger: logger, into: &outcome)
            }
        } catch let stop as ReconcilerError {
            outcome.stop = stop
        }
        return outcome
    }

    /// What the metrics and the report page need once the work is done.
    private func conclude(
        _ outcome: inout Outcome, database: Database, target: AppTarget, metrics: MetricsRegistry?, logger: Logger
    ) async {
        let ledger = RunLedger(database: database)
        if let metrics {
            // What alerts watch besides this run: the quarantine, the last finished run, the newest live notification.
            try? await LedgerMetrics(
                ledger: ledger, environment: target.environment.rawValue, bundleId: target.bundleId, registry: metrics
            ).refresh()
        }
        if let reportHtml, let report = outcome.reports.last {
            do {
                try await ReportPageFile.write(report: report, ledger: ledger, to: reportHtml, logger: logger)
            } catch let error as ReconcilerError {
                outcome.stop = outcome.stop ?? error
            } catch {
                outcome.stop = outcome.stop ?? .configuration("cannot write the report page to \(reportHtml): \(error)")
            }
        }
    }

    /// What this invocation did, over one window or several.
    struct Outcome {
        /// The app and environment of these runs.
        var target: AppTarget
        var reports: [RunReport] = []
        /// Scheduled windows given up because they left Apple's retention.
        var lost: [RunRecord] = []
        /// The error that stopped the invocation.
        var stop: ReconcilerError?
        /// Another run of this app and environment held the lease, so this one did nothing.
        var leaseHeld = false

        /// The most pressing of the reports (``ExitClass/mostPressing(_:)-([ExitClass])``); windows lost to retention need a person.
        var exitCode: Int32 {
            if let stop { return stop.exitCode }
            let classes = reports.map { ExitClass(runStatus: $0.status) } + (lost.isEmpty ? [] : [.attention])
            return ExitClass.mostPressing(classes).map { classes[$0].rawValue } ?? 0
        }

        /// The outcome that decides a whole invocation's exit code: configuration (1) over
        /// retryable (2) over attention (4); `nil` when everything was recovered. In a run of
        /// several apps and environments, one whose lease another run holds is being recovered
        /// there, and counts as done here.
        static func worst(_ outcomes: [Outcome], several: Bool) -> Outcome? {
            worstIndex(outcomes, several: several).map { outcomes[$0] }
        }

        static func worstIndex(_ outcomes: [Outcome], several: Bool) -> Int? {
            ExitClass.mostPressing(outcomes.map { several && $0.leaseHeld ? 0 : $0.exitCode })
        }

        var error: ReconcilerError {
            if let stop { return stop }
            if let report = reports.last(where: { $0.status == .partial || $0.status == .interrupted || $0.status == .failed }) {
                return .partial(
                    "not everything was recovered (run \(report.runId) is \(report.status.rawValue)); rerun the same command to resume it")
            }
            let quarantined = reports.reduce(0) { $0 + $1.rejections.filter(\.newlyQuarantined).count }
            return .attention(
                "done, but needs attention: \(quarantined) payloads newly quarantined (`reconciler rejections`), "
                    + "\(lost.count) windows lost to retention, refused requests are listed in the report")
        }
    }

    /// The options every window of this invocation runs with.
    private func runTemplate(giveUpAfterInFile: Int?) throws -> ReconcileRun.Configuration {
        var planner = ReplayPlanner.Configuration(maximumShardsPerQuery: maxShards)
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
            options: RunOptions(
                planner: planner, allCustomers: all, refreshStatus: refreshStatus, forwardTo: nil),
            replayConcurrency: concurrency, gapConcurrency: gapConcurrency,
            lease: .init(duration: leaseDuration, renewalInterval: max(leaseDuration / 6, .milliseconds(500)), wait: wait), fresh: fresh,
            giveUp: try GiveUpOption.policy(giveUpAfter, file: giveUpAfterInFile))
    }

    private func requireSchema(_ database: Database) async throws {
        do {
            try await Migrator().requireCurrent(database)
        }
    }

    /// The schedule (``ScheduleChain``): retry every unfinished scheduled window in its own window
    /// (the core gives up those that left Apple's retention), then always recover from where the
    /// chain ended, minus the overlap, to now, so a window that stays unfinished never freezes the
    /// schedule. This prints what the plan says and runs its windows.
    private func runSchedule(
        _ template: ReconcileRun.Configuration, database: Database, verifier: SignedDataVerifier,
        client: AppStoreServerAPIClient, ledger: RunLedger, logger: Logger, into outcome: inout Outcome
    ) async throws {
        let target = verifier.configuration.target
        let (environmentName, bundleId) = (target.environment.rawValue, target.bundleId)
        let retention = ReconcileRun.retention(target.environment)
        let now = Timestamp.now
        let plan = try await ScheduleChain.prepare(target, overlap: overlap, dryRun: template.dryRun, database: database, now: now)
        for lost in plan.lost {
            logger.error(
                "a scheduled window left Apple's notification history retention before it was finished; it is lost",
                metadata: ["runId": "\(lost.runId)", "window": "\(lost.window)"])
            print(
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
            print(
                "WARNING: scheduled run \(unfinished.runId) (\(unfinished.window.start) → \(unfinished.window.end)) is unfinished "
                    + "and leaves Apple's retention in \(daysLeft) days; `reconciler rejections` lists what holds it")
        }
        for unfinished in plan.retry {
            // Each unfinished window again, as it was planned; what it cannot finish is reported, and the schedule goes on.
            logger.info(
                "retrying an unfinished scheduled window before the newest one",
                metadata: ["runId": "\(unfinished.runId)", "window": "\(unfinished.window)", "status": "\(unfinished.status.rawValue)"])
            var configuration = template
            (configuration.window, configuration.kind) = (unfinished.window, .scheduled)
            configuration.options = unfinished.options
            configuration.options.forwardTo = template.options.forwardTo ?? unfinished.options.forwardTo
            try await execute(configuration, database: database, verifier: verifier, client: client, logger: logger, into: &outcome)
        }
        let (next, origin) = (plan.next, plan.origin)
        if origin == .firstWindow {
            logger.notice("the schedule's first window: no earlier run and no live notification yet", metadata: ["app": "\(target)"])
            print(
                "first scheduled window for \(target): nothing recorded yet, so it starts \(overlap.operatorText) ago; "
                    + "recover anything earlier with `reconciler run --start T --app \(target.bundleId) --environment \(target.environment.rawValue.lowercased())`"
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
        try await execute(configuration, database: database, verifier: verifier, client: client, logger: logger, into: &outcome) { report in
            // The newest report says which windows of the chain are still unfinished (this one included).
            report.unfinishedScheduledWindows = try await ledger.unfinishedScheduledRuns(environment: environmentName, bundleId: bundleId)
                .map { .init(runId: $0.runId, window: $0.window, status: $0.status) }
        }
    }

    /// Runs one window with progress, signals and the report; a stop that ends the whole
    /// invocation is thrown as a ``ReconcilerError``.
    private func execute(
        _ configuration: ReconcileRun.Configuration, database: Database, verifier: SignedDataVerifier,
        client: AppStoreServerAPIClient, logger: Logger, into outcome: inout Outcome,
        completing complete: ((inout RunReport) async throws -> Void)? = nil
    ) async throws {
        let run = ReconcileRun(configuration: configuration, database: database, verifier: verifier, client: client)
        let progress = RunProgress()
        let reporter = ProgressReporter(progress: progress, logger: logger, interval: .seconds(max(progressInterval, 1)))
        let progressTask = Task { await reporter.run() }
        defer { progressTask.cancel() }
        func stop(_ report: RunReport?, _ error: ReconcilerError) throws -> Never {
            progressTask.cancel()
            if let report {
                try? output(report)
                outcome.reports.append(report)
            }
            throw error
        }
        do {
            var report = try await run.reconcile(progress: progress) { logger.notice("another run holds the lease; waiting (--wait)") }
            progressTask.cancel()
            await progressTask.value
            try await complete?(&report)
            try output(report)
            outcome.reports.append(report)
        } catch let error as ReconcileRun.RunStopped {
            switch error.reason {
            case .interrupted: try stop(error.report, .partial("interrupted: rerun the same command to resume"))
            case .configuration(let text):
                try stop(error.report, .configuration((error.cause as? AppStoreServerAPIError)?.operatorDescription ?? text))
            case .unavailable(let text): try stop(error.report, .partial("the run stopped: \(text); rerun the same command to resume"))
            }
        } catch is CancellationError {
            try stop(nil, .partial("interrupted before the run started; rerun the same command"))
        } catch let error as ReconcilerError where error.code == .leaseHeld {
            outcome.leaseHeld = true
            try stop(nil, .configuration(error.description))
        } catch let error as ReconcilerError where error.code == .invalidWindow {
            try stop(nil, .configuration(error.description))
        } catch let error as AppStoreServerAPIError {
            if case .unauthorized = error { try stop(nil, .configuration(error.operatorDescription)) }
            try stop(nil, .partial("the run stopped: \(error); rerun the same command to resume"))
        } catch let error as ReconcilerError where error.code == .databaseUnavailable {
            try stop(nil, .partial("the run stopped: \(error); rerun the same command to resume"))
        } catch let error where Database.isDatabaseFailure(error) {
            try stop(
                nil, .partial("the database failed during the run (\(Database.operatorDescription(of: error))); rerun the same command to resume"))
        }
    }

    private func output(_ report: RunReport) throws {
        print(report.humanSummary())
        if let reportJson { try write(report, toJSON: reportJson) }
    }

    /// The JSON report of a run over several apps and environments: `{"targets": [...]}`, each the
    /// newest report of its app and environment (or where it stopped before one).
    private func write(_ outcomes: [Outcome], toJSON path: String) throws {
        do {
            let entries: [Any] = try outcomes.map { outcome in
                if let report = outcome.reports.last { return try JSONSerialization.jsonObject(with: try report.json()) }
                var entry: [String: Any] = [
                    "bundleId": outcome.target.bundleId, "environment": outcome.target.environment.rawValue, "exitCode": outcome.exitCode,
                ]
                if let stop = outcome.stop { entry["stopped"] = stop.description }
                if outcome.leaseHeld { entry["leaseHeldByAnotherRun"] = true }
                return entry
            }
            let data = try JSONSerialization.data(withJSONObject: ["targets": entries], options: [.prettyPrinted, .sortedKeys])
            try data.write(to: URL(fileURLWithPath: path))
        } catch {
            throw ReconcilerError.configuration("cannot write the report to \(path): \(error.localizedDescription)")
        }
    }

    private func write(_ report: RunReport, toJSON path: String) throws {
        do {
            try report.json().write(to: URL(fileURLWithPath: path))
        } catch {
            throw ReconcilerError.configuration("cannot write the report to \(path): \(error.localizedDescription)")
        }
    }

    /// --start/--end (validate() made sure --start is given with this form).
    private func manualWindow() -> TimeWindow {
        TimeWindow(start: start ?? .now, end: end ?? .now)
    }

    /// The windows `detect-outage` finds.
    private func detectedWindows(client: AppStoreServerAPIClient, logger: Logger) async throws -> [TimeWindow] {
        let detection = try await OutageDetector(client: client).detect(in: TimeWindow(start: .now - detectSince, end: .now))
        for window in detection.windows {
            logger.info("detected outage window", metadata: ["window": "\(window.window)", "failed": "\(window.notifications)"])
        }
        return detection.windows.map(\.window)
    }
}
