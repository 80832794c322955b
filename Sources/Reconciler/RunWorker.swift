package import AppStoreServer
import Foundation
import Logging
package import ReconcilerDomain
package import ReconcilerStore

/// Joins a run's phase 2 from another process or machine (`reconciler work`): leases customers
/// from the run's queue in PostgreSQL and recovers them exactly as the run does, until none is
/// left and the run's phase 1 (which queues more as it replays) has ended.
///
/// ```swift
/// let worker = RunWorker(configuration: .init(runId: 42), scope: target.scope, database: database, verifier: verifier, client: client)
/// try await worker.work(progress: RunProgress())
/// ```
package struct RunWorker: Sendable {
    package struct Configuration: Sendable {
        package var runId: Int64
        /// Customers processed at once.
        package var concurrency: Int
        /// Names this process in the queue.
        package var worker: String
        /// When a customer that keeps failing is given up.
        package var giveUp: GiveUpPolicy

        package init(runId: Int64, concurrency: Int = 8, worker: String = ProcessIdentity.current, giveUp: GiveUpPolicy = .init()) {
            self.runId = runId
            self.concurrency = concurrency
            self.worker = worker
            self.giveUp = giveUp
        }
    }

    package let configuration: Configuration
    let handler: NotificationHandler
    let client: AppStoreServerAPIClient
    let ledger: RunLedger
    let logger: Logger

    /// - Parameter scope: the app and environment of the run, with its rule for `entitled` (the verifier's app).
    package init(
        configuration: Configuration, scope: AppScope, database: Database, verifier: SignedDataVerifier, client: AppStoreServerAPIClient
    ) {
        self.configuration = configuration
        self.handler = NotificationHandler(scope: scope, verifier: verifier, database: database)
        self.client = client
        self.ledger = RunLedger(database: database)
        self.logger = database.logger
    }

    /// Works through the run's queue; returns when no customer is left for this process.
    package func work(progress: RunProgress) async throws {
        let runId = configuration.runId
        guard let run = try await ledger.run(id: runId) else { throw ReconcilerError(.cannotJoin, "there is no run \(runId)") }
        let scope = handler.scope
        guard run.environment == scope.environment, run.bundleId == scope.bundleId else {
            throw ReconcilerError(
                .cannotJoin,
                "run \(runId) is for \(run.bundleId) in \(run.environment), not the configured \(scope.bundleId) in \(scope.environment)"
            )
        }
        guard !run.kind.isAboutCustomers else {
            throw ReconcilerError(.cannotJoin, "run \(runId) is a \(run.kind.rawValue) of customers: there is nothing to share")
        }
        guard run.status == .running else {
            throw ReconcilerError(.cannotJoin, "run \(runId) is \(run.status.rawValue); rerun it with `reconciler run` first")
        }
        let shadow = run.dryRun ? try await ShadowSchema.create(runId: runId, on: handler.database) : nil
        let apiAtStart = client.statistics.snapshot
        let apiTimeline = APITimelineRecorder(runId: runId, worker: configuration.worker, client: client, ledger: ledger)
        let context = RunContext(
            run: run, handler: handler.shadowed(by: shadow), client: client, ledger: ledger, progress: progress,
            tally: VerificationTally(), logger: logger, giveUp: configuration.giveUp)
        let filler = GapFiller(configuration: .init(concurrency: configuration.concurrency, worker: configuration.worker), context: context)
        // Phase 2 runs beside phase 1: while the run still replays, more customers may come.
        let replaying = Locked(run.phase == .replay)
        let watcher = Task { [ledger] in
            while replaying.withLock({ $0 }), !Task.isCancelled {
                try? await Task.sleep(for: .seconds(1))
                if let phase = try? await ledger.run(id: runId)?.phase, phase != .replay {
                    replaying.withLock { $0 = false }
                    context.newCustomers.notify()
                }
            }
        }
        defer { watcher.cancel() }
        do {
            try await filler.fill(while: { replaying.withLock { $0 } })
        } catch {
            await apiTimeline.recordDetached()
            let (ledger, api) = (
                RunLedger(database: ledger.database.with(unavailableTimeout: .seconds(5))), client.statistics.snapshot.since(apiAtStart)
            )
            try? await Task.detached { try await ledger.addAPIStatistics(runId: runId, api) }.value
            throw error
        }
        try await apiTimeline.record()
        try await ledger.addAPIStatistics(runId: runId, client.statistics.snapshot.since(apiAtStart))
    }
}
