import AppStoreServer
import Foundation
import Logging
import PostgresNIO

/// The main job: replay an outage window's notifications (phase 1), then fill the remaining gaps
/// per customer (phase 2), one run at a time per app and environment, resumable after any crash.
///
/// ```swift
/// let run = ReconcileRun(configuration: .init(windowStart: start, windowEnd: end), handler: handler, client: client)
/// let report = try await run.run(progress: RunProgress())
/// print(report.humanSummary())
/// ```
///
/// Rerunning the same window resumes the newest unfinished (or partial) run for it: finished
/// shards are skipped, unfinished ones continue from their checkpoint, failed shards and
/// customers are retried. After a run succeeded, the same window starts a new run, which finds
/// only duplicates and unchanged revisions.
public struct ReconcileRun: Sendable {
    public struct Configuration: Sendable {
        public var windowStart: Int64
        public var windowEnd: Int64
        public var dryRun: Bool
        public var options: RunOptions
        public var replayConcurrency: Int
        public var gapConcurrency: Int
        /// Wait for another run's lock instead of failing.
        public var waitForLock: Bool
        /// Start a new run even if an unfinished one exists for the window.
        public var fresh: Bool
        /// Names this process in the ledger (`host:pid`).
        public var holder: String

        public init(windowStart: Int64, windowEnd: Int64, dryRun: Bool = false, options: RunOptions = .init(), replayConcurrency: Int = 8,
                    gapConcurrency: Int = 8, waitForLock: Bool = false, fresh: Bool = false,
                    holder: String = "\(ProcessInfo.processInfo.hostName):\(ProcessInfo.processInfo.processIdentifier)") {
            self.windowStart = windowStart
            self.windowEnd = windowEnd
            self.dryRun = dryRun
            self.options = options
            self.replayConcurrency = replayConcurrency
            self.gapConcurrency = gapConcurrency
            self.waitForLock = waitForLock
            self.fresh = fresh
            self.holder = holder
        }
    }

    /// A window the App Store cannot serve.
    public struct InvalidWindow: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    public let configuration: Configuration
    public let handler: NotificationHandler
    public let client: AppStoreServerAPIClient
    let ledger: RunLedger
    let logger: Logger

    public init(configuration: Configuration, handler: NotificationHandler, client: AppStoreServerAPIClient) {
        self.configuration = configuration
        self.handler = handler
        self.client = client
        self.logger = handler.database.logger
        self.ledger = RunLedger(client: handler.database.client, logger: handler.database.logger)
    }

    var environment: String { handler.verifier.configuration.environment.rawValue }
    var bundleId: String { handler.verifier.configuration.bundleId }

    /// Checks the window against Apple's limits before anything is locked or written.
    public static func validate(windowStart: Int64, windowEnd: Int64, environment: AppStoreEnvironment,
                                now: Int64 = Int64(Date().timeIntervalSince1970 * 1000)) throws {
        guard windowStart < windowEnd else {
            throw InvalidWindow(description: "the window's start \(TimeArgument.iso8601(windowStart)) is not before its end \(TimeArgument.iso8601(windowEnd))")
        }
        guard windowStart < now else {
            throw InvalidWindow(description: "the window starts in the future (\(TimeArgument.iso8601(windowStart)))")
        }
        let retentionDays: Int64 = environment == .production ? 180 : 30
        let oldest = now - retentionDays * 86_400_000 + 60_000
        guard windowStart >= oldest else {
            throw InvalidWindow(description: "the window starts before Apple's notification history retention (\(retentionDays) days in \(environment.rawValue.lowercased()), so no earlier than \(TimeArgument.iso8601(oldest))); use a later --start, and `--all` to check every customer's transaction history")
        }
    }

    /// Runs (or resumes) the run for the window and returns its report.
    public func run(progress: RunProgress, onWait: @Sendable () -> Void = {}) async throws -> RunReport {
        try Self.validate(windowStart: configuration.windowStart, windowEnd: configuration.windowEnd,
                          environment: handler.verifier.configuration.environment)
        let lock = RunLock(client: handler.database.client, logger: logger)
        return try await lock.withLock(environment: environment, bundleId: bundleId, wait: configuration.waitForLock, onWait: onWait) {
            let run = try await startOrResume()
            logger.info("run started", metadata: [
                "runId": "\(run.runId)", "window": "\(TimeArgument.iso8601(run.windowStart))/\(TimeArgument.iso8601(run.windowEnd))",
                "phase": "\(run.phase.rawValue)", "dryRun": "\(run.dryRun)",
            ])
            do {
                try await execute(run, progress: progress)
                return try await finish(run, interrupted: false)
            } catch {
                // Record the outcome even though this task may be cancelled: a task of its own is not.
                let interrupted = error is CancellationError || Task.isCancelled
                let ledger = self.ledger, client = self.client
                _ = try? await Task {
                    if interrupted {
                        _ = try await finish(run, interrupted: true)
                    } else {
                        try await ledger.finish(runId: run.runId, status: .failed, apiStatistics: client.statistics.snapshot, report: nil)
                    }
                }.value
                throw interrupted ? CancellationError() : error
            }
        }
    }

    private func startOrResume() async throws -> RunRecord {
        if !configuration.fresh, let existing = try await ledger.resumableRun(
            environment: environment, bundleId: bundleId, windowStart: configuration.windowStart,
            windowEnd: configuration.windowEnd, dryRun: configuration.dryRun) {
            try await ledger.resume(runId: existing.runId, holder: configuration.holder)
            logger.info("resuming run", metadata: ["runId": "\(existing.runId)", "previousStatus": "\(existing.status.rawValue)"])
            return try await ledger.run(id: existing.runId) ?? existing
        }
        let planner = ReplayPlanner(configuration: configuration.options.planner)
        let shards = planner.plan(windowStart: configuration.windowStart, windowEnd: configuration.windowEnd)
        return try await ledger.createRun(
            environment: environment, bundleId: bundleId, windowStart: configuration.windowStart, windowEnd: configuration.windowEnd,
            dryRun: configuration.dryRun, options: configuration.options, shards: shards, holder: configuration.holder)
    }

    private func execute(_ run: RunRecord, progress: RunProgress) async throws {
        if run.phase == .replay {
            let replayer = NotificationReplayer(
                configuration: .init(runId: run.runId, dryRun: run.dryRun, concurrency: configuration.replayConcurrency),
                handler: handler, client: client, ledger: ledger, progress: progress, logger: logger)
            try await replayer.run()
            try await ledger.setPhase(runId: run.runId, .gapFill)
        }
        try await ledger.enqueueAtRisk(runId: run.runId, environment: run.environment, windowEnd: run.windowEnd, all: run.options.allCustomers)
        let filler = GapFiller(
            configuration: .init(runId: run.runId, environment: run.environment, dryRun: run.dryRun, refreshStatus: run.options.refreshStatus,
                                 concurrency: configuration.gapConcurrency, worker: configuration.holder),
            verifier: handler.verifier, client: client, database: handler.database, ledger: ledger, progress: progress, logger: logger)
        try await filler.run()
        // Customers other workers (`reconciler work`) still hold: wait for them, or take them over
        // if their worker died (its row lock is gone and the row is pending again).
        while try await ledger.queueSummary(runId: run.runId).pending > 0 {
            try await Task.sleep(for: .seconds(1))
            try await filler.run()
        }
    }

    private func finish(_ run: RunRecord, interrupted: Bool) async throws -> RunReport {
        var report = try await Self.report(run: run, ledger: ledger, finishedAt: Date(), extraAPI: client.statistics.snapshot)
        if interrupted { report.status = .interrupted } else { report.status = report.isComplete ? .succeeded : .partial }
        try await ledger.finish(runId: run.runId, status: report.status, apiStatistics: client.statistics.snapshot,
                                report: String(decoding: try report.json(), as: UTF8.self))
        return report
    }

    /// Builds the report of a run from its ledger (so it covers every process that worked on it).
    public static func report(run: RunRecord, ledger: RunLedger, finishedAt: Date, extraAPI: APIStatistics.Snapshot = .zero) async throws -> RunReport {
        let counts = try await ledger.counts(runId: run.runId)
        var total = RunReport.NotificationCounts()
        var byType: [String: RunReport.NotificationCounts] = [:]
        for (type, outcomes) in counts {
            for (outcome, count) in outcomes {
                total.add(outcome, count)
                byType[type, default: .init()].add(outcome, count)
            }
        }
        let shards = try await ledger.shards(runId: run.runId)
        let queue = try await ledger.queueSummary(runId: run.runId)
        let changes = try await ledger.changes(runId: run.runId).map { change in
            RunReport.Change(originalTransactionId: change.after.originalTransactionId, fields: change.after.changedFields(from: change.before),
                             before: change.before, after: change.after)
        }
        return RunReport(
            runId: run.runId, environment: run.environment, bundleId: run.bundleId, windowStart: run.windowStart, windowEnd: run.windowEnd,
            dryRun: run.dryRun, status: run.status, startedAt: run.startedAt, finishedAt: finishedAt,
            durationSeconds: finishedAt.timeIntervalSince(run.startedAt), notifications: total, notificationsByType: byType,
            shardsTotal: shards.count,
            shardsFailed: shards.filter { $0.status == .failed }.map {
                .init(query: $0.shard.filter.description, shardStart: $0.shard.start, shardEnd: $0.shard.end, error: $0.lastError ?? "")
            },
            pages: shards.reduce(0) { $0 + $1.pagesDone }, paginationRestarts: shards.reduce(0) { $0 + $1.restarts },
            customersChecked: queue.done + queue.failed, customersFailed: try await ledger.failedCustomers(runId: run.runId),
            transactionsFetched: try await ledger.transactionsSeen(runId: run.runId), changes: changes,
            rejections: try await ledger.rejections(runId: run.runId),
            api: try await ledger.apiStatistics(runId: run.runId) + extraAPI)
    }
}
