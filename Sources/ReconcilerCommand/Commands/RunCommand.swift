import AppStoreServer
import ArgumentParser
import Forwarder
import Foundation
import Logging
import Reconciler
import ReconcilerConfiguration
import ReconcilerDomain
import ReconcilerMetrics
import ReconcilerShared
import ReconcilerStore

struct RunCommand: AsyncParsableCommand, UsesAppsOptions {
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

            With a configuration file of several apps and environments (RECONCILER_CONFIG), every one is recovered \
            at once, each in its own run, lease and share of its app's budget; --app and --environment choose some. \
            The reports print once all are done, in the file's order.

            T is ISO 8601 with zero-padded fields and a zone (2026-11-20T03:10:00Z, 2026-11-20T04:10:00+01:00), UNIX \
            milliseconds (1763608200000), or now-<number><unit> (now-6h, now-90m); anything else is refused. Each \
            window is printed (both ends and its length) before its first request.
            Exit codes: 0 everything was recovered; 4 done, but something needs a person (payloads quarantined for \
            the first time, requests Apple refused, a window lost to retention); 2 partial or interrupted (rerun to \
            resume); 1 usage or configuration error, or another run holds the lease.

              reconciler run --start 2026-11-20T03:10:00Z --end 2026-11-20T05:45:00Z \\
                  --dry-run
              reconciler run --start 2026-11-20T03:10:00Z --end 2026-11-20T05:45:00Z \\
                  --report-json report.json --report-html incident.html
              reconciler run --since-last \\
                  --metrics-file /var/lib/node_exporter/textfile_collector/reconciler.prom
            """)

    @Option(help: ArgumentHelp("Start of the window (ISO 8601 with a zone, UNIX ms, or now-6h).", valueName: "T"), transform: Timestamp.argument)
    var start: Timestamp?
    @Option(help: ArgumentHelp("End of the window (default now).", valueName: "T"), transform: Timestamp.argument) var end: Timestamp?
    @Flag(help: "The schedule's next window: retry the unfinished scheduled windows, then recover from the chain's end minus --overlap to now.")
    var sinceLast = false
    @Option(
        help: ArgumentHelp(
            "Give up a customer or shard that failed in this many attempts of its run in a row (default 6, env RECONCILER_GIVE_UP_AFTER).",
            valueName: "n"))
    var giveUpAfter: Int?
    @Option(help: ArgumentHelp("Overlap for --since-last.", valueName: "duration")) var overlap: Duration = .hours(1)
    @Flag(help: "Recover the windows `detect-outage` finds (failed deliveries in the last --detect-since).") var detected = false
    @Option(help: ArgumentHelp("How far back --detected looks.", valueName: "duration")) var detectSince: Duration = .days(7)
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
    @Option(help: ArgumentHelp("With --shard-duration: the most shards a query starts with.", valueName: "n")) var maxShards: Int = 48
    @Option(help: ArgumentHelp("Shards paged at once in phase 1.", valueName: "n")) var concurrency: Int = 8
    @Option(help: ArgumentHelp("Customers processed at once in phase 2.", valueName: "n")) var gapConcurrency: Int = 8
    @Flag(help: "Wait for another run of this app and environment to finish instead of exiting.") var wait = false
    @Flag(help: "Start a new run even if an unfinished one exists for this window.") var fresh = false
    @Option(help: ArgumentHelp("Also write the report as JSON to this file (with several windows, the last).", valueName: "path")) var reportJson:
        String?
    @Option(
        help: ArgumentHelp(
            "Also write the incident report page, one self-contained HTML file, to this file (also for a partial or interrupted run; with several windows, the last). With several apps or environments, one page each: incident.html becomes incident-com.example.one-production.html and so on, each named after its report.",
            valueName: "path"))
    var reportHtml: String?
    @Option(
        help: ArgumentHelp(
            "Write Prometheus metrics (node_exporter textfile format) to this file, atomically, whatever the outcome "
                + "(not when another run holds the lease: that run writes it).", valueName: "path"))
    var metricsFile: String?
    @Option(help: ArgumentHelp("Seconds between progress log lines when not on a terminal.", valueName: "s")) var progressInterval: Int =
        10
    @Option(
        help: ArgumentHelp(
            "How long the run lease lasts without renewal; a killed run's window can be taken over after it.",
            valueName: "duration"))
    var leaseDuration: Duration = .seconds(30)
    @Option(
        help: ArgumentHelp(
            """
            Deliver each notification this run records that Apple did not deliver to this webhook, as Apple's exact body, \
            for every app (env RECONCILER_FORWARD_TO); without it, to each app's forwardTo (never both).
            """, valueName: "url"))
    var forwardTo: String?
    @Option(
        help: ArgumentHelp(
            """
            How long the run waits at its end for its deliveries; the rest is delivered by the next run, \
            `serve --forward-to` or `reconciler forward`.
            """, valueName: "duration"))
    var forwardDrainTimeout: Duration = .seconds(60)

    @OptionGroup var options: AppleOptions
    @OptionGroup(title: "Forwarding") var forwarding: ForwardingOptions

    func validate() throws {
        let windowForms = [start != nil || end != nil, sinceLast, detected].filter { $0 }.count
        guard windowForms == 1 else {
            throw ValidationError("give the window as --start T [--end T], or --since-last, or --detected")
        }
        if end != nil, start == nil { throw ValidationError("--end needs --start") }
        if let reportHtml { try ReportPageFile.validate(reportHtml, option: "--report-html") }
        try MetricsFile.validate(metricsFile)
        guard concurrency >= 1, gapConcurrency >= 1, maxShards >= 1 else { throw ValidationError("concurrency and --max-shards must be at least 1") }
        _ = try GiveUpOption.policy(giveUpAfter)
        if let shortfall = Recovery.Configuration.connectionShortfall(
            maximumConnections: database.maxConnections, replayConcurrency: concurrency, gapConcurrency: gapConcurrency,
            forwards: forwardTo != nil || Env.value("RECONCILER_FORWARD_TO") != nil)
        {
            throw ValidationError(shortfall)
        }
    }

    func run() async throws {
        let logger = logging.makeLogger()
        // One registry for the process; each app and environment's series carry its own labels
        // (``MetricsRegistry/scoped(_:)``).
        let metrics = MetricsFile(metricsFile, app: app)
        let kind: RunRecord.Kind = sinceLast ? .scheduled : detected ? .detected : .manual
        let (outcomes, pages) = try await metrics.recordingFailure(logger: logger) { registry, exitCode in
            RunMetrics.record(exitCode: exitCode, kind: kind, report: nil, in: registry)
        } work: {
            try await recover(metrics: metrics?.registry, logger: logger)
        }
        for (index, outcome) in outcomes.enumerated() {
            print(outcome.text(several: outcomes.count > 1, detected: detected, page: pages[index]))
            // Another run holds the lease: the file keeps what that run (the one doing the work) writes.
            if let metrics, !outcome.leaseHeld {
                RunMetrics.record(
                    exitCode: outcome.exitCode, kind: kind, report: outcome.reports.last,
                    in: metrics.registry.scoped(outcome.scope.target))
            }
        }
        try metrics?.write()
        if !dryRun { try await answerDueConsumptionRequests(logger: logger) }
        if let reportJson, let data = try RecoveryOutcome.reportJSON(outcomes) {
            do {
                try data.write(to: URL(fileURLWithPath: reportJson))
            } catch {
                throw ReconcilerError.configuration("cannot write the report to \(reportJson): \(error.localizedDescription)")
            }
        }
        // The worst of the apps and environments decides the exit code.
        if let ending = RecoveryOutcome.ending(outcomes) { throw ending }
    }

    /// Every configured app and environment (or those `--app` and `--environment` choose), at once
    /// in one process and database pool, each in its own runs with its own lease and its own share
    /// of its app's budget (``Recovery``): a 401 or an outage of one does not stop the others.
    /// Returns each app and environment's outcome, and where its incident page was written (by index).
    private func recover(metrics: MetricsRegistry?, logger: Logger) async throws -> (outcomes: [RecoveryOutcome], pages: [Int: String]) {
        let loaded = try app.loadTargets(api: api)
        let targets = loaded.targets
        let template = try ReconcileRun.Configuration.template(
            dryRun: dryRun, priority: priority, shardDuration: shardDuration, maximumShardsPerQuery: maxShards, allCustomers: all,
            refreshStatus: refreshStatus, replayConcurrency: concurrency, gapConcurrency: gapConcurrency, leaseDuration: leaseDuration,
            wait: wait, fresh: fresh, giveUp: try GiveUpOption.policy(giveUpAfter, file: loaded.configuration.giveUpAfter))
        let configuration = Recovery.Configuration(
            windows: windows, template: template, forwardDrainTimeout: forwardDrainTimeout, maximumConnections: database.maxConnections,
            unknownEntitlementSetting: UnknownEntitlement.setting(configurationFile: app.configurationFile))
        // Each app's recovered notifications go to its own webhook (`forwardTo` in the file), or all to
        // --forward-to, each signed with its secret: checked before anything starts, also in a dry run.
        let forwardingPlan = try forwarding.plan(forwardTo: forwardTo, configuration: loaded.configuration, targets: targets.map(\.configuration))
        let forwarderConfigurations = try forwarding.configurations(for: forwardingPlan)
        let forwardWebhooks = targets.map { forwardingPlan.webhooks(for: $0.app) }
        let forwarders = forwardWebhooks.map { webhooks in
            dryRun ? [] : webhooks.compactMap { webhook in forwarderConfigurations.first { $0.url.target.id == webhook.url.target.id } }
        }
        // Phase 1 pages the notification history, phase 2 the customers' transaction history and
        // statuses (a resumed run keeps the --refresh-status it started with).
        let endpoints: [AppStoreServerAPIEndpoint] = [.getNotificationHistory, .getTransactionHistory, .getAllSubscriptionStatuses]
        let reportHtml = self.reportHtml
        let progress = RecoveryProgress(
            logger: logger, interval: .seconds(max(progressInterval, 1)), several: targets.count > 1, json: logging.json)
        // SIGINT or SIGTERM stop the work at a checkpoint (exit 2); see CommandLifecycle.
        return try await database.runWork(logger: logger) { database in
            let recovery = Recovery(
                configuration: configuration,
                targets: targets.indices.map { index in
                    Recovery.Target(
                        scope: targets[index].scope, origins: targets[index].origins, verifier: targets[index].verifier,
                        client: targets[index].client, budget: .init(claims: targets[index].budget.claims(endpoints)),
                        forwarder: Forwarders.forwarding(forwarders[index], database: database),
                        forwardRoutes: forwardWebhooks[index].map(\.route))
                }, database: database, logger: logger)
            var outcomes = await recovery.recover(progress: progress.progress(of:), starting: progress.announce)
            await progress.stop()
            await metrics?.refreshLedgerGauges(of: targets, ledger: RunLedger(database: database))
            let pages = await ReportPageFile.write(reportHtml, for: &outcomes, ledger: RunLedger(database: database), logger: logger)
            return (outcomes, pages)
        }
    }

    /// With `consumption: {automatic: true}`, the requests whose `answerAfter` passed and whose
    /// deadline has not are answered by the policy after the recovery, through each app's shared
    /// budget (joined only here, while answers are sent). What it sent is printed; an answer not
    /// sent is logged and left to the next run or `consumption respond`, and does not change the
    /// run's exit code.
    private func answerDueConsumptionRequests(logger: Logger) async throws {
        let loaded = try app.loadTargets(api: api)
        let automatic = loaded.targets.filter { $0.configuration.consumption.policy?.automatic == true }
        guard !automatic.isEmpty else { return }
        let targets = automatic.compactMap {
            ConsumptionResponder.Target(app: $0.app, settings: $0.configuration.consumption, client: $0.client, origins: $0.origins)
        }
        let outcome = try await database.runWork(logger: logger, sharing: automatic.map { $0.sharing([.sendConsumptionInformation]) }) {
            try await ConsumptionResponder.answerDue(targets, database: $0)
        }
        if !outcome.accepted.isEmpty || !outcome.failed.isEmpty {
            print("consumption  \(Plural.count(outcome.accepted.count, "request")) answered by the consumption policy (automatic)")
        }
        if let ending = outcome.ending { logger.warning("automatic consumption answers: \(ending.description)") }
    }

    /// The windows this invocation recovers.
    private var windows: Recovery.Windows {
        if sinceLast { return .sinceLast(overlap: overlap) }
        if detected { return .detected(since: detectSince) }
        // validate() made sure --start is given with this form.
        return .window(TimeWindow(start: start ?? .now, end: end ?? .now))
    }
}
