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
                --max-connections \(database.maxConnections) could starve this run: it works on --concurrency \(Plural.count(concurrency, "shard")) and \
                --gap-concurrency \(Plural.count(gapConcurrency, "customer")) at once, plus its lease, its bookkeeping, the shared budget\(forwards ? " and the forwarder" : ""), so it needs \(needed); \
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
        let outcomes: [RecoveryOutcome]
        let pages: [Int: String]
        do {
            (outcomes, pages) = try await recover(metrics: metrics, logger: logger)
        } catch {
            // Stopped before any run could report (configuration, the database): alerts still see the exit code.
            do {
                if let metrics {
                    RunMetrics.record(
                        exitCode: ReconcilerError(endingCommandWith: error)?.exitCode ?? 1, kind: invocationKind, report: nil, in: metrics)
                }
                try writeMetrics(metrics)
            } catch let metricsError {
                logger.error("\(metricsError)")
            }
            throw error
        }
        let several = outcomes.count > 1
        for (index, outcome) in outcomes.enumerated() {
            print(Self.text(of: outcome, several: several, detected: detected, page: pages[index]))
            // Another run holds the lease: the file keeps what that run (the one doing the work) writes.
            if let metrics, !outcome.leaseHeld {
                RunMetrics.record(
                    exitCode: outcome.exitCode, kind: invocationKind, report: outcome.reports.last,
                    in: metrics.scoped(environment: outcome.scope.environment.rawValue, bundleId: outcome.scope.bundleId))
            }
        }
        try writeMetrics(metrics)
        if let reportJson {
            if several {
                try write(outcomes, toJSON: reportJson)
            } else if let report = outcomes.first?.reports.last {
                try write(report, toJSON: reportJson)
            }
        }
        // The worst of the apps and environments decides the exit code. With several, each one's
        // section said what stopped it: the last line names them instead of saying it again.
        guard let worst = RecoveryOutcome.worst(outcomes) else { return }
        guard several else { throw worst.error }
        let named = outcomes.filter { !$0.leaseHeld && $0.exitCode == worst.exitCode }.map { "\($0.scope.target)" }
        throw ReconcilerError(
            worst.error.code,
            "\(named.joined(separator: ", ")) \(named.count == 1 ? "was" : "were") not recovered in full (exit \(worst.exitCode)): "
                + "\(named.count == 1 ? "its section" : "their sections") above \(named.count == 1 ? "says" : "say") why")
    }

    /// What one app and environment did, as the operator reads it: under its header when there are
    /// several, what needs reading first, each window's report, its incident page, the deliveries.
    static func text(of outcome: RecoveryOutcome, several: Bool, detected: Bool, page: String? = nil) -> String {
        var lines: [String] = several ? ["== \(outcome.scope.target)"] : []
        lines += outcome.notices
        lines += outcome.reports.map { $0.humanSummary() }
        if several, let stop = outcome.stop { lines += stopLine(stop, of: outcome) }
        if let page, let report = outcome.reports.last { lines.append(ReportPageFile.line(path: page, report: report)) }
        if let drained = outcome.forwarded {
            lines.append(forwardedLine("\(Plural.count(drained.own.delivered, "notification")) delivered to the app's webhook", drained.own))
            if !drained.earlierRuns.isEmpty {
                let runs = drained.earlierRuns.map(String.init).joined(separator: ", ")
                let label = "earlier runs' deliveries (run\(drained.earlierRuns.count == 1 ? "" : "s") \(runs))"
                lines.append(forwardedLine("\(label): \(drained.earlier.delivered) delivered", drained.earlier))
            }
        }
        if detected, outcome.reports.isEmpty, outcome.stop == nil, outcome.lost.isEmpty {
            lines.append("no failed deliveries found: nothing to recover")
        }
        return lines.joined(separator: "\n")
    }

    /// What stopped one app and environment of several, said once: a report's `failure` line says
    /// it already, so only what the stop adds (the remedy) follows it.
    static func stopLine(_ stop: ReconcilerError, of outcome: RecoveryOutcome) -> [String] {
        let message = stop.operatorMessage
        guard let failure = outcome.reports.last?.failure, message.hasPrefix(failure) else { return ["\(outcome.scope.target): \(message)"] }
        let rest = message.dropFirst(failure.count).drop { $0 == ":" || $0 == ";" || $0 == " " }
        return rest.isEmpty ? [] : ["  remedy       \(rest)"]
    }

    /// Every configured app and environment (or those `--app` and `--environment` choose), at once
    /// in one process and database pool, each in its own runs with its own lease and its own share
    /// of its app's budget (``Recovery``): a 401 or an outage of one does not stop the others.
    /// Returns each app and environment's outcome, and the incident page written for each (by index).
    private func recover(metrics: MetricsRegistry?, logger: Logger) async throws -> (outcomes: [RecoveryOutcome], pages: [Int: String]) {
        let loaded = try app.loadTargets(api: api)
        let targets = loaded.targets
        let configuration = Recovery.Configuration(
            windows: try windows(), template: try runTemplate(giveUpAfterInFile: loaded.configuration.giveUpAfter),
            forwardDrainTimeout: forwardDrainTimeout, maximumConnections: database.maxConnections)
        // Each app's recovered notifications go to its own webhook (`forwardTo` in the file), or all to
        // --forward-to, each signed with its secret: checked before anything starts, also in a dry run.
        let forwardingPlan = try forwarding.plan(forwardTo: forwardTo, configuration: loaded.configuration, targets: targets.map(\.configuration))
        let forwarderConfigurations = try forwarding.configurations(for: forwardingPlan)
        let forwardURLs = targets.map { forwardingPlan.webhook(for: $0.app)?.url }
        let forwarders = forwardURLs.map { url in dryRun ? nil : forwarderConfigurations.first { $0.url.target.id == url?.target.id } }
        // Phase 1 pages the notification history, phase 2 the customers' transaction history and
        // statuses (a resumed run keeps the --refresh-status it started with).
        let endpoints: [AppStoreServerAPIEndpoint] = [.getNotificationHistory, .getTransactionHistory, .getAllSubscriptionStatuses]
        let (reportHtml, interval, detected) = (self.reportHtml, Duration.seconds(max(progressInterval, 1)), self.detected)
        // SIGINT or SIGTERM stop the work at a checkpoint (exit 2); see CommandLifecycle.
        return try await database.runWork(logger: logger) { database in
            try await Migrator().requireCurrent(database)
            let recovery = Recovery(
                configuration: configuration,
                targets: targets.indices.map { index in
                    Recovery.Target(
                        scope: targets[index].scope, origins: targets[index].origins, verifier: targets[index].verifier,
                        client: targets[index].client,
                        budget: .init(claims: targets[index].budget.claims(endpoints)),
                        forwarder: forwarders[index].map { Forwarder(configuration: $0, database: database) },
                        forwardTo: forwardURLs[index]?.target)
                }, database: database, logger: logger)
            let reporters = Locked<[Task<Void, Never>]>([])
            let json = logging.json
            var outcomes = await recovery.recover(
                progress: { scope in
                    let progress = RunProgress()
                    var targetLogger = logger
                    if targets.count > 1 { targetLogger[metadataKey: "app"] = "\(scope)" }
                    // On a terminal one line is rewritten in place: with several apps, each logs its own instead.
                    let reporter = ProgressReporter(
                        progress: progress, logger: targetLogger, interval: interval, rewritesLine: targets.count == 1)
                    reporters.withLock { $0.append(Task { await reporter.run() }) }
                    return progress
                },
                starting: { Self.announce($0, json: json, logger: logger) })
            for reporter in reporters.withLock({ $0 }) {
                reporter.cancel()
                await reporter.value
            }
            for (outcome, target) in zip(outcomes, targets) {
                // What alerts watch besides this run: the quarantine, the last finished run, the newest live notification.
                guard let metrics else { break }
                let (environment, bundleId) = (outcome.scope.environment.rawValue, outcome.scope.bundleId)
                try? await LedgerMetrics(
                    ledger: RunLedger(database: database), environment: environment, bundleId: bundleId,
                    registry: metrics.scoped(environment: environment, bundleId: bundleId),
                    liveConsumptionRequests: target.configuration.consumption.liveRequests
                ).refresh()
            }
            // A null `entitled` never goes unexplained: how many purchases have one, and the setting.
            let setting = UnknownEntitlement.setting(configurationFile: app.configurationFile)
            for index in outcomes.indices where !outcomes[index].reports.isEmpty {
                let unknown = try? await UnknownEntitlement.count(of: outcomes[index].scope, setting: setting, in: database)
                for report in outcomes[index].reports.indices { outcomes[index].reports[report].unknownEntitlement = unknown }
            }
            // One page per app and environment, each showing its newest run (``ReportPageFile/path(_:for:)``);
            // a page that cannot be written is a configuration error.
            var pages: [Int: String] = [:]
            for index in outcomes.indices {
                guard let reportHtml, let report = outcomes[index].reports.last else { continue }
                let path = targets.count > 1 ? ReportPageFile.path(reportHtml, for: outcomes[index].scope.target) : reportHtml
                do {
                    try await ReportPageFile.write(report: report, ledger: RunLedger(database: database), to: path, logger: logger, announce: false)
                    pages[index] = path
                } catch {
                    let stop = (error as? ReconcilerError) ?? .configuration("cannot write the report page to \(path): \(error)")
                    outcomes[index].stop = outcomes[index].stop ?? stop
                }
            }
            return (outcomes, pages)
        }
    }

    /// Prints the window a run is about to recover, before its first request, whatever the log
    /// level (a typo in a time shows here, not after the recovery): one line on stderr, stdout
    /// keeping the reports; with `--log-format json`, a notice log line.
    static func announce(_ start: Recovery.WindowStart, json: Bool, logger: Logger) {
        let verb = start.dryRun ? "dry run, would recover" : "recovering"
        guard !json else {
            logger.notice(
                "\(verb) a window",
                metadata: [
                    "app": "\(start.scope)", "start": "\(start.window.start)", "end": "\(start.window.end)",
                    "length": "\(start.window.duration.readableText)", "kind": "\(start.kind.rawValue)",
                ])
            return
        }
        // On a terminal the progress line may be on screen: clear it first.
        let clear = ProgressReporter.stderrIsTerminal ? "\r\u{1B}[K" : ""
        FileHandle.standardError.write(Data("\(clear)\(verb) \(start.scope): \(start.window.readableText)\n".utf8))
    }

    /// The windows this invocation recovers.
    private func windows() throws -> Recovery.Windows {
        if sinceLast { return .sinceLast(overlap: overlap) }
        if detected { return .detected(since: detectSince) }
        // validate() made sure --start is given with this form.
        return .window(TimeWindow(start: start ?? .now, end: end ?? .now))
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

    /// `forwarded    <what was delivered>, N pending, N failed`, and what to do about the rest.
    static func forwardedLine(_ delivered: String, _ summary: ForwardQueue.ForwardingSummary) -> String {
        "forwarded    \(delivered), \(summary.pending) pending, \(summary.failed) failed"
            + (summary.pending > 0 ? "; `reconciler forward` or the next run delivers the rest" : "")
            + (summary.failed > 0 ? "; `reconciler forward --retry-failed` tries the failed ones again" : "")
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
            options: RunOptions(planner: planner, allCustomers: all, refreshStatus: refreshStatus),
            replayConcurrency: concurrency, gapConcurrency: gapConcurrency,
            lease: .init(duration: leaseDuration, renewalInterval: max(leaseDuration / 6, .milliseconds(500)), wait: wait), fresh: fresh,
            giveUp: try GiveUpOption.policy(giveUpAfter, file: giveUpAfterInFile))
    }

    /// The JSON report of a run over several apps and environments: `{"targets": [...]}`, each the
    /// newest report of its app and environment (or where it stopped before one).
    private func write(_ outcomes: [RecoveryOutcome], toJSON path: String) throws {
        do {
            let entries: [Any] = try outcomes.map { outcome in
                if let report = outcome.reports.last { return try JSONSerialization.jsonObject(with: try report.json()) }
                var entry: [String: Any] = [
                    "bundleId": outcome.scope.bundleId, "environment": outcome.scope.environment.rawValue, "exitCode": outcome.exitCode,
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
}
