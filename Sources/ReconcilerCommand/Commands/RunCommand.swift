import AppStoreServer
import ArgumentParser
import Foundation
import Logging
import PostgresNIO
import Reconciler

struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Recover an outage window: replay missed notifications, then fill the gaps per customer.",
        discussion: """
            Phase 1 pages Get Notification History over the window, urgent types first (DID_RENEW and EXPIRED \
            before the rest), then one unfiltered sweep that catches everything else; every notification goes \
            through the same verified handler as the live webhook. Phase 2 fetches Get Transaction History from \
            each at-risk customer's stored revision. Ctrl-C, a crash or SIGKILL loses nothing: rerunning the same \
            window resumes from the last checkpoint.

            T is ISO 8601 (2026-11-20T03:10:00Z), UNIX milliseconds, or now-6h.
            Exit codes: 0 everything in the window was recovered; 2 partial or interrupted (the report lists what \
            failed; rerun to retry); 1 usage or configuration error, or another run holds the lock.

              reconciler run --start 2026-11-20T03:10:00Z --end 2026-11-20T05:45:00Z --dry-run
              reconciler run --start 2026-11-20T03:10:00Z --end 2026-11-20T05:45:00Z --report-json report.json
              reconciler run --since-last --metrics-file /var/lib/node_exporter/reconciler.prom
            """)

    @Option(help: ArgumentHelp("Start of the window.", valueName: "T")) var start: String?
    @Option(help: ArgumentHelp("End of the window (default now).", valueName: "T")) var end: String?
    @Flag(help: "Start where the last successful run's window ended (else at the newest live notification), minus --overlap; end now.")
    var sinceLast = false
    @Option(help: ArgumentHelp("Overlap for --since-last (default 1h).", valueName: "duration")) var overlap: String = "1h"
    @Flag(help: "Recover the windows `detect-outage` finds (failed deliveries in the last --detect-since).") var detected = false
    @Option(help: ArgumentHelp("How far back --detected looks (default 7d).", valueName: "duration")) var detectSince: String = "7d"
    @Flag(help: "Change nothing; report what would change.") var dryRun = false
    @Flag(help: "Phase 2 checks every known customer, not only those at risk.") var all = false
    @Flag(help: "Phase 2 also calls Get All Subscription Statuses for each customer.") var refreshStatus = false
    @Option(help: ArgumentHelp("Typed queries before the sweep, most urgent first, e.g. DID_RENEW,DID_RENEW/BILLING_RECOVERY,EXPIRED/VOLUNTARY.", valueName: "list"))
    var priority: String?
    @Option(help: ArgumentHelp("Target length of a time shard (default 30m).", valueName: "duration")) var shardDuration: String = "30m"
    @Option(help: ArgumentHelp("Most shards per query (default 48).", valueName: "n")) var maxShards: Int = 48
    @Option(help: ArgumentHelp("Shards paged at once in phase 1 (default 8).", valueName: "n")) var concurrency: Int = 8
    @Option(help: ArgumentHelp("Customers processed at once in phase 2 (default 8).", valueName: "n")) var gapConcurrency: Int = 8
    @Flag(help: "Wait for another run of this app and environment to finish instead of exiting.") var wait = false
    @Flag(help: "Start a new run even if an unfinished one exists for this window.") var fresh = false
    @Option(help: ArgumentHelp("Also write the report as JSON to this file.", valueName: "path")) var reportJson: String?
    @Option(help: ArgumentHelp("Write Prometheus metrics (node_exporter textfile format) to this file.", valueName: "path")) var metricsFile: String?
    @Option(help: ArgumentHelp("Seconds between progress log lines when not on a terminal (default 10).", valueName: "s")) var progressInterval: Int = 10

    @OptionGroup var app: AppOptions
    @OptionGroup var api: APIOptions
    @OptionGroup var database: DatabaseOptions
    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        let windowForms = [start != nil || end != nil, sinceLast, detected].filter { $0 }.count
        guard windowForms == 1 else {
            throw ValidationError("give the window as --start T [--end T], or --since-last, or --detected")
        }
        if end != nil, start == nil { throw ValidationError("--end needs --start") }
        guard concurrency >= 1, gapConcurrency >= 1, maxShards >= 1 else { throw ValidationError("concurrency and --max-shards must be at least 1") }
    }

    func run() async throws {
        let logger = logging.makeLogger()
        let verifier = try app.verifier()
        let client = try api.client(app: app)
        var planner = ReplayPlanner.Configuration(maximumShardsPerQuery: maxShards)
        guard let shard = TimeArgument.duration(shardDuration), shard >= 1000 else {
            throw CommandError.configuration("--shard-duration: \(shardDuration) is not a duration of at least 1s")
        }
        planner.shardDuration = shard
        if let priority {
            planner.priority = try priority.split(separator: ",").map { item in
                guard let filter = NotificationFilter(parsing: String(item)) else {
                    throw CommandError.configuration("--priority: \(item) is not a notification type or TYPE/SUBTYPE Apple documents")
                }
                return filter
            }
        }
        let options = RunOptions(planner: planner, allCustomers: all, refreshStatus: refreshStatus)
        let outcome: (report: RunReport, lastSuccess: Date?)? = try await database.withClient(logger: logger) { postgres in
            try await requireSchema(postgres, logger: logger)
            let handler = NotificationHandler(verifier: verifier, database: Database(client: postgres, logger: logger))
            let windows = try await resolveWindows(postgres: postgres, client: client, logger: logger, verifier: verifier)
            var last: RunReport?
            for (windowStart, windowEnd) in windows {
                let run = ReconcileRun(
                    configuration: .init(windowStart: windowStart, windowEnd: windowEnd, dryRun: dryRun, options: options,
                                         replayConcurrency: concurrency, gapConcurrency: gapConcurrency, waitForLock: wait, fresh: fresh),
                    handler: handler, client: client)
                last = try await execute(run, logger: logger)
                if last?.status != .succeeded { break }
            }
            guard let last else { return nil }
            let lastSuccess = try await RunLedger(client: postgres, logger: logger)
                .lastSuccessTime(environment: verifier.configuration.environment.rawValue, bundleId: verifier.configuration.bundleId)
            return (last, lastSuccess)
        }
        guard let (report, lastSuccess) = outcome else {
            print("no failed deliveries found: nothing to recover")
            return
        }
        if let metricsFile {
            try RunMetrics.write(report: report, to: metricsFile, lastSuccess: lastSuccess)
        }
        switch report.status {
        case .succeeded: return
        case .interrupted: throw CommandError.partial("interrupted: rerun the same command to resume run \(report.runId)")
        default: throw CommandError.partial("not everything was recovered (run \(report.runId) is \(report.status.rawValue)); see the report")
        }
    }

    private func requireSchema(_ postgres: PostgresClient, logger: Logger) async throws {
        do {
            try await Migrator().requireCurrent(postgres, logger: logger)
        } catch let error as Migrator.MigrationError {
            throw CommandError.configuration(error.description)
        }
    }

    /// Runs one window with progress, signals and the report.
    private func execute(_ run: ReconcileRun, logger: Logger) async throws -> RunReport {
        let progress = RunProgress()
        let reporter = ProgressReporter(progress: progress, logger: logger, interval: .seconds(max(progressInterval, 1)))
        let progressTask = Task { await reporter.run() }
        defer { progressTask.cancel() }
        let report: RunReport
        do {
            report = try await cancellingOnSignals {
                try await run.run(progress: progress) {
                    logger.notice("another run holds the lock; waiting (--wait)")
                }
            }
        } catch let error as RunLock.Busy {
            throw CommandError.configuration(error.description)
        } catch let error as ReconcileRun.InvalidWindow {
            throw CommandError.configuration(error.description)
        } catch let error as AppStoreServerAPIError {
            if case .unauthorized = error { throw CommandError.configuration(error.operatorDescription) }
            throw CommandError.partial("the run stopped: \(error); rerun the same command to resume")
        } catch let error as PSQLError {
            throw CommandError.partial("the database failed during the run (\(error.briefDescription)); rerun the same command to resume")
        } catch is Interrupted {
            progressTask.cancel()
            // The run recorded itself as interrupted; show what it had done.
            let ledger = RunLedger(client: run.handler.database.client, logger: logger)
            if let record = try await ledger.resumableRun(
                environment: run.handler.verifier.configuration.environment.rawValue, bundleId: run.handler.verifier.configuration.bundleId,
                windowStart: run.configuration.windowStart, windowEnd: run.configuration.windowEnd, dryRun: run.configuration.dryRun) {
                var interrupted = try await ReconcileRun.report(run: record, ledger: ledger, finishedAt: Date())
                interrupted.status = .interrupted
                try output(interrupted)
                return interrupted
            }
            throw CommandError.partial("interrupted before the run started")
        }
        progressTask.cancel()
        await progressTask.value
        try output(report)
        return report
    }

    private func output(_ report: RunReport) throws {
        print(report.humanSummary())
        if let reportJson {
            do {
                try report.json().write(to: URL(fileURLWithPath: reportJson))
            } catch {
                throw CommandError.configuration("cannot write the report to \(reportJson): \(error.localizedDescription)")
            }
        }
    }

    /// The windows to recover: --start/--end, --since-last or --detected.
    private func resolveWindows(postgres: PostgresClient, client: AppStoreServerAPIClient, logger: Logger,
                                verifier: SignedDataVerifier) async throws -> [(Int64, Int64)] {
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        if let start {
            guard let startTime = TimeArgument.parse(start, now: now) else {
                throw CommandError.configuration("--start: \(start) is not a time (ISO 8601 such as 2026-11-20T03:10:00Z, UNIX milliseconds, or now-6h)")
            }
            let endTime: Int64
            if let end {
                guard let parsed = TimeArgument.parse(end, now: now) else {
                    throw CommandError.configuration("--end: \(end) is not a time (ISO 8601 such as 2026-11-20T05:45:00Z, UNIX milliseconds, or now)")
                }
                endTime = parsed
            } else {
                endTime = now
            }
            return [(startTime, endTime)]
        }
        let environment = verifier.configuration.environment.rawValue
        let bundleId = verifier.configuration.bundleId
        if sinceLast {
            guard let overlapMilliseconds = TimeArgument.duration(overlap) else {
                throw CommandError.configuration("--overlap: \(overlap) is not a duration such as 1h")
            }
            let ledger = RunLedger(client: postgres, logger: logger)
            let lastEnd = try await ledger.lastSuccessfulWindowEnd(environment: environment, bundleId: bundleId)
            let newestLive = try await PurchaseStore(logger: logger).newestLiveNotification(environment: environment, on: postgres)
            guard let anchor = lastEnd ?? newestLive else {
                throw CommandError.configuration("--since-last: there is no successful run and no live notification yet; give the first window with --start")
            }
            let startTime = anchor - overlapMilliseconds
            logger.info("window from --since-last", metadata: [
                "start": "\(TimeArgument.iso8601(startTime))", "from": "\(lastEnd != nil ? "last successful run" : "newest live notification")",
            ])
            return [(startTime, now)]
        }
        guard let since = TimeArgument.duration(detectSince) else {
            throw CommandError.configuration("--detect-since: \(detectSince) is not a duration such as 7d")
        }
        let detection = try await OutageDetector(client: client).detect(since: now - since, until: now)
        for window in detection.windows {
            logger.info("detected outage window", metadata: [
                "start": "\(TimeArgument.iso8601(window.start))", "end": "\(TimeArgument.iso8601(window.end))", "failed": "\(window.notifications)",
            ])
        }
        return detection.windows.map { ($0.start, $0.end) }
    }
}
