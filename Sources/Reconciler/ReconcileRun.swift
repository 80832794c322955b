package import AppStoreServer
package import Foundation
import Logging
package import ReconcilerDomain
package import ReconcilerShared
package import ReconcilerStore

/// The main job: replay an outage window's notifications (phase 1), then fill the remaining gaps
/// per customer (phase 2), one run at a time per app and environment, resumable after any crash.
///
/// ```swift
/// let run = ReconcileRun(configuration: .init(window: TimeWindow(start: start, end: .now)), scope: target.scope, database: database, verifier: verifier, client: client)
/// let report = try await run.reconcile(progress: RunProgress())
/// print(report.humanSummary())
/// ```
///
/// Rerunning the same window resumes its newest unfinished run: finished shards are skipped,
/// unfinished ones continue from their checkpoint, failed shards and customers are retried.
/// After a run finished, the same window starts a new run, which finds only duplicates and
/// unchanged revisions. A run that cannot finish records how it stopped (when the database lets it),
/// hands that report to `stopped`, and throws the error that stopped it, with its code.
package struct ReconcileRun: Sendable {
    package struct Configuration: Sendable {
        package var window: TimeWindow
        package var kind: RunRecord.Kind
        package var dryRun: Bool
        package var options: RunOptions
        package var replayConcurrency: Int
        package var gapConcurrency: Int
        /// The run lease: how long, how often renewed, and whether to wait for another run's.
        package var lease: RunLease.Configuration
        /// Start a new run even if an unfinished one exists for the window.
        package var fresh: Bool
        /// When a customer or shard that keeps failing is given up, so the window can finish.
        package var giveUp: GiveUpPolicy
        /// The moment the run's time rows fall due by (the wall clock; tests move their own).
        package var now: @Sendable () -> Timestamp = { .now }

        package init(
            window: TimeWindow, kind: RunRecord.Kind = .manual, dryRun: Bool = false, options: RunOptions = .init(),
            replayConcurrency: Int = 8, gapConcurrency: Int = 8, lease: RunLease.Configuration = .init(), fresh: Bool = false,
            giveUp: GiveUpPolicy = .init()
        ) {
            self.window = window
            self.kind = kind
            self.dryRun = dryRun
            self.options = options
            self.replayConcurrency = replayConcurrency
            self.gapConcurrency = gapConcurrency
            self.lease = lease
            self.fresh = fresh
            self.giveUp = giveUp
        }

        /// The connections a run of this configuration uses at once: one per shard and customer
        /// worked on, one for its lease, one for its bookkeeping.
        package var connectionsNeeded: Int { replayConcurrency + gapConcurrency + 2 }
    }

    package let configuration: Configuration
    let handler: NotificationHandler
    let client: AppStoreServerAPIClient
    let ledger: RunLedger
    let logger: Logger
    /// The app and environment the run is for, as the command was given it.
    let app: AppTarget

    /// - Parameter scope: the app and environment, with its rule for `entitled` (the verifier's app).
    package init(
        configuration: Configuration, scope: AppScope, database: Database, verifier: SignedDataVerifier, client: AppStoreServerAPIClient
    ) {
        self.configuration = configuration
        self.handler = NotificationHandler(scope: scope, verifier: verifier, database: database)
        self.client = client
        self.logger = database.logger
        self.ledger = RunLedger(database: database)
        self.app = scope.target
    }

    /// How far back Apple keeps notification history.
    package static func retention(_ environment: AppStoreEnvironment) -> Duration {
        .days(environment == .production ? 180 : 30)
    }

    /// Checks the window against Apple's limits before anything is locked or written.
    package static func validate(_ window: TimeWindow, environment: AppStoreEnvironment, now: Timestamp = .now) throws {
        guard window.start < window.end else {
            throw ReconcilerError(.invalidWindow, "the window's start \(window.start) is not before its end \(window.end)")
        }
        guard window.start < now else {
            throw ReconcilerError(.invalidWindow, "the window starts in the future (\(window.start))")
        }
        let oldest = now - retention(environment) + .seconds(60)
        guard window.start >= oldest else {
            throw ReconcilerError(
                .invalidWindow,
                "the window starts before Apple's notification history retention (\(retention(environment).days) days in \(environment.rawValue.lowercased()), so no earlier than \(oldest)); use a later --start, and `--all` to check every customer's transaction history"
            )
        }
    }

    /// Runs (or resumes) the run for the window and returns its report.
    /// - Parameter stopped: told the report of a run that stopped before it finished (as it was
    ///   recorded), before the error that stopped it is thrown.
    package func reconcile(
        progress: RunProgress, onWait: @Sendable () -> Void = {}, stopped: (RunReport) -> Void = { _ in }
    ) async throws -> RunReport {
        try Self.validate(configuration.window, environment: app.environment)
        let lease = RunLease(configuration: configuration.lease, ledger: ledger)
        let recorded = Locked<RunReport?>(nil)
        do {
            return try await lease.withLease(app: app, onWait: onWait) { handle in
                let record = try await startOrResume()
                try await handle.attach(runId: record.runId)
                logger.info(
                    "run started",
                    metadata: [
                        "runId": "\(record.runId)", "kind": "\(record.kind.rawValue)",
                        "window": "\(record.window)",
                        "phase": "\(record.phase.rawValue)", "dryRun": "\(record.dryRun)",
                    ])
                return try await runHoldingLease(record, progress: progress) { report in recorded.withLock { $0 = report } }
            }
        } catch {
            // A lost lease records nothing: another process may own the run now.
            if let report = recorded.withLock({ $0 }) { stopped(report) }
            throw error
        }
    }

    private func runHoldingLease(_ record: RunRecord, progress: RunProgress, stopped: @Sendable (RunReport) -> Void) async throws -> RunReport {
        // The client counts for the whole process; this run's share is what it adds from here.
        let apiAtStart = client.statistics.snapshot
        let apiTimeline = APITimelineRecorder(runId: record.runId, worker: configuration.lease.holder, client: client, ledger: ledger)
        var shadow: ShadowSchema?
        do {
            if record.dryRun {
                try await ShadowSchema.dropAll(
                    except: Set(
                        try await ledger.recentRuns(limit: 200).filter { $0.dryRun && !$0.status.isFinished }
                            .map(\.runId)
                    ).union([record.runId]), on: handler.database)
                shadow = try await ShadowSchema.create(runId: record.runId, on: handler.database)
            }
            try await execute(record, handler: handler.shadowed(by: shadow), progress: progress)
            // What time ended since serve's leader last looked (or while no serve ran): the unique
            // key keeps a row the leader writes too single. Not the run's recovery: named by no run,
            // counted apart in the report. A dry run writes none.
            let timeRows =
                record.dryRun
                ? nil : try await TimeRowWriter(scopes: [handler.scope], database: handler.database).writeDue(at: configuration.now()).count
            let api = client.statistics.snapshot.since(apiAtStart)
            var report = try await Self.report(
                run: record, ledger: ledger, database: handler.database.shadowed(by: shadow), finishedAt: Date(),
                extraAPI: api)
            report.timeRows = timeRows
            report.status = report.completedStatus
            try await apiTimeline.record()
            try await ledger.finish(
                runId: record.runId, status: report.status, apiStatistics: api,
                report: String(decoding: try report.json(), as: UTF8.self))
            // A finished dry run needs its copies no more; an unfinished one resumes with them.
            if let shadow, report.status.isFinished { try await shadow.drop(on: handler.database) }
            return report
        } catch {
            await apiTimeline.recordDetached()
            // Whatever a cancelled wait threw (a cancelled connection lease is a database error), it was the signal.
            let error = Task.isCancelled ? ReconcilerError.interruption : error
            guard let stop = ReconcilerError(endingCommandWith: error), let status = Self.recordedStatus(of: stop) else { throw error }
            if let report = await recordStop(of: record, by: stop, status: status, api: client.statistics.snapshot.since(apiAtStart)) {
                stopped(report)
            }
            throw error
        }
    }

    /// How a run that `stop` ended is recorded: a signal leaves it interrupted, a configuration that
    /// must change failed; `nil` records nothing (the lease lost, a checkpoint moved under the run,
    /// the database away or anything else a rerun resumes: another process may own the run now, or
    /// the database would not take the record).
    static func recordedStatus(of stop: ReconcilerError) -> RunRecord.Status? {
        switch stop.code {
        case .interrupted: .interrupted
        case .databaseRefused: nil
        case _ where stop.exitClass == .configuration: .failed
        default: nil
        }
    }

    /// Records how a run stopped (when the database lets it) and returns its report.
    private func recordStop(
        of record: RunRecord, by stop: ReconcilerError, status: RunRecord.Status, api: APIStatistics.Snapshot
    ) async -> RunReport? {
        // Recorded even though this task may be cancelled: a detached task is not, and a database
        // that is going away gets only a few seconds.
        let ledger = RunLedger(database: ledger.database.with(unavailableTimeout: .seconds(5)))
        let failure = status == .failed ? stop.description : nil
        return try? await Task.detached {
            var report = try await Self.report(run: record, ledger: ledger, finishedAt: Date(), extraAPI: api)
            report.status = status
            report.failure = failure
            try await ledger.finish(
                runId: record.runId, status: status, failure: failure, apiStatistics: api,
                report: String(decoding: try report.json(), as: UTF8.self))
            return report
        }.value
    }

    private func startOrResume() async throws -> RunRecord {
        if !configuration.fresh,
            let existing = try await ledger.resumableRun(
                app: app, window: configuration.window, dryRun: configuration.dryRun)
        {
            try await ledger.resume(runId: existing.runId, holder: configuration.lease.holder, forwardRoutes: configuration.options.forwardRoutes)
            logger.info("resuming run", metadata: ["runId": "\(existing.runId)", "previousStatus": "\(existing.status.rawValue)"])
            return try await ledger.run(id: existing.runId) ?? existing
        }
        let planner = ReplayPlanner(configuration: configuration.options.planner)
        let shards = planner.plan(configuration.window)
        return try await ledger.createRun(
            kind: configuration.kind, app: app, window: configuration.window,
            dryRun: configuration.dryRun, options: configuration.options, shards: shards,
            holder: configuration.lease.holder)
    }

    /// Both phases at once: phase 2 starts with the customers due, and takes the ones phase 1
    /// touches as it replays them, so each endpoint spends its own budget while the other does.
    private func execute(_ run: RunRecord, handler: NotificationHandler, progress: RunProgress) async throws {
        let context = RunContext(
            run: run, handler: handler, client: client, ledger: ledger, progress: progress, tally: VerificationTally(),
            logger: logger, giveUp: configuration.giveUp)
        let due = try await handler.database.transaction { [store = handler.store] transaction in
            try await store.customers.dueAnchors(by: run.window.end, all: run.options.allCustomers, on: transaction)
        }
        try await ledger.database.transaction { [ledger] transaction in
            try await ledger.enqueue(runId: run.runId, anchors: due, reason: run.options.allCustomers ? .all : .due, on: transaction)
        }
        // Customers a killed process of this machine still held need not wait for their lease to run out.
        try await ledger.releaseCustomers(runId: run.runId, ofWorkers: { ProcessIdentity.isDeadOnThisHost($0) })
        let replaying = Locked(run.phase == .replay)
        let filler = GapFiller(configuration: .init(concurrency: configuration.gapConcurrency, worker: configuration.lease.holder), context: context)
        try await withThrowingTaskGroup(of: Void.self) { group in
            if run.phase == .replay {
                group.addTask { [configuration, ledger] in
                    try await NotificationReplayer(configuration: .init(concurrency: configuration.replayConcurrency), context: context).replay()
                    try await ledger.setPhase(runId: run.runId, .gapFill)
                    replaying.withLock { $0 = false }
                    context.newCustomers.notify()
                }
            }
            group.addTask { try await filler.fill(while: { replaying.withLock { $0 } }) }
            // What one phase throws stops the run (a failed shard or customer is recorded, not
            // thrown): leaving the group cancels the other phase instead of waiting for it.
            for try await _ in group {}
        }
        // Customers other workers (`reconciler work`) still hold: wait for them, or take them over
        // when their lease runs out (at once when their process was on this machine and is gone).
        while try await ledger.queueSummary(runId: run.runId).open > 0 {
            try await Task.sleep(for: .seconds(1))
            try await ledger.releaseCustomers(runId: run.runId, ofWorkers: { ProcessIdentity.isDeadOnThisHost($0) })
            try await filler.fill()
        }
    }

    /// The notification types whose recovery the priority order serves first.
    static let urgentTypes = NotificationRules.urgentTypeNames

    /// Builds the report of a run from its ledger (so it covers every process that worked on it).
    /// `database` is where its notifications are (a dry run's shadow tables while it runs).
    package static func report(
        run: RunRecord, ledger: RunLedger, finishedAt: Date, extraAPI: APIStatistics.Snapshot = .zero
    ) async throws -> RunReport {
        try await report(run: run, ledger: ledger, database: ledger.database, finishedAt: finishedAt, extraAPI: extraAPI)
    }

    static func report(
        run: RunRecord, ledger: RunLedger, database: Database, finishedAt: Date,
        extraAPI: APIStatistics.Snapshot = .zero
    ) async throws -> RunReport {
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
        let listed = try await ledger.changes(runId: run.runId, limit: RunReport.listedChangesLimit)
        let changes = listed.changes.map { change in
            RunReport.Change(
                originalTransactionId: change.after.originalTransactionId, fields: change.after.changedFields(from: change.before),
                before: change.before, after: change.after)
        }
        let gapFill = try await ledger.gapFillTotals(runId: run.runId)
        let store = PurchaseStore(database: database, scope: nil)
        let urgent = try await database.transaction { transaction in
            try await store.notifications.lastRecorded(runId: run.runId, types: Self.urgentTypes, on: transaction)
        }
        // Judged at the report's moment: a request recovered late may already be past its deadline.
        let now = Timestamp(finishedAt)
        let consumption = try await database.transaction { [logger = database.logger] transaction in
            try await ConsumptionRequests(logger: logger).recorded(byRun: run.runId, limit: RunReport.listedChangesLimit, at: now, on: transaction)
        }
        var report = RunReport(
            runId: run.runId, kind: run.kind, environment: run.environment, bundleId: run.bundleId, windowStart: run.window.start,
            windowEnd: run.window.end, dryRun: run.dryRun, status: run.status, failure: run.failure, startedAt: run.startedAt,
            finishedAt: finishedAt, durationSeconds: finishedAt.timeIntervalSince(run.startedAt),
            replaySeconds: try await ledger.run(id: run.runId)?.replayFinishedAt.map { max($0.timeIntervalSince(run.startedAt), 0) },
            urgentRecoverySeconds: urgent.map { max($0.timeIntervalSince(run.startedAt), 0) }, notifications: total,
            notificationsByType: byType, shardsTotal: shards.count,
            shardsFailed: shards.filter { $0.status == .failed }.map {
                .init(
                    query: $0.shard.filter.description, shardStart: $0.shard.window.start, shardEnd: $0.shard.window.end,
                    kind: $0.failureKind ?? .retryable,
                    error: $0.lastError ?? "")
            },
            pages: shards.pagesDone, paginationRestarts: shards.reduce(0) { $0 + $1.restarts },
            customersChecked: queue.done + queue.failed, customersFailed: try await ledger.failedCustomers(runId: run.runId),
            transactionsFetched: gapFill.transactionsSeen, revisionResets: gapFill.revisionResets, changes: changes,
            changesTotal: listed.total,
            rejections: try await ledger.rejections(runId: run.runId), givenUp: try await ledger.givenUp(runId: run.runId),
            api: try await ledger.apiStatistics(runId: run.runId) + extraAPI)
        report.consumptionRequests = consumption.requests.map { RunReport.ConsumptionRequestEntry($0, at: now) }
        report.consumptionRequestsTotal = consumption.total
        report.consumptionRequestsOpen = consumption.open
        report.consumptionRequestsExpired = consumption.expired
        report.consumptionRequestsAcked = consumption.acked
        return report
    }
}
