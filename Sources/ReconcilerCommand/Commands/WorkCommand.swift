import AppStoreServer
import ArgumentParser
import Foundation
import Logging
import Reconciler
import ReconcilerConfiguration
import ReconcilerDomain
import ReconcilerShared
import ReconcilerStore

struct WorkCommand: AsyncParsableCommand, UsesAppsOptions {
    static let configuration = CommandConfiguration(
        commandName: "work",
        abstract: "Join a run's phase 2 (the per-customer transaction history) from another machine.",
        discussion: """
            Workers share the run's customer queue in PostgreSQL (FOR UPDATE SKIP LOCKED). The app's budget \
            (APP_STORE_RATE_LIMIT) is divided among the live processes that call each endpoint, so workers \
            need no --rate-limit of their own (it would cap this worker alone). It takes customers as the run \
            queues them (phase 2 runs beside phase 1) until no customer is left and phase 1 has ended. Configure it like the run (same app, environment \
            and database). Exit 0 when the queue is done; 2 when customers this worker took failed.

              reconciler work --run 42
            """)

    @Option(name: .customLong("run"), help: ArgumentHelp("The run to join.", valueName: "id")) var runId: Int64
    @Option(help: ArgumentHelp("Customers processed at once.", valueName: "n")) var concurrency: Int = 8
    @Option(
        help: ArgumentHelp(
            "Give up a customer that failed in this many attempts of the run in a row (default 6, env RECONCILER_GIVE_UP_AFTER).",
            valueName: "n"))
    var giveUpAfter: Int?

    @OptionGroup var options: AppleOptions

    func validate() throws {
        guard concurrency >= 1 else { throw ValidationError("--concurrency must be at least 1") }
        _ = try GiveUpOption.policy(giveUpAfter)
        guard database.maxConnections >= concurrency + 2 else {
            throw ValidationError(
                "--max-connections \(database.maxConnections) could starve \(concurrency) customer workers: a worker needs one connection per customer it works on, one for its bookkeeping and one for the shared budget; set --max-connections to at least \(concurrency + 2) or lower --concurrency"
            )
        }
    }

    /// The app and environment of the run this worker joins: the run's record names them, so a
    /// worker of a deployment with several apps needs no `--app`.
    private func runTarget(_ loaded: LoadedTargets, logger: Logger) async throws -> CommandTarget {
        let targets = loaded.targets
        // `--app` and `--environment` (or the file) leave one: the worker works for it.
        if targets.count == 1 { return targets[0] }
        // A short read before the work: the worker's own client, lifecycle and budget start after.
        let runId = self.runId
        let run = try await database.withDatabase(logger: logger) { database in try await RunLedger(database: database).run(id: runId) }
        guard let run else { throw ReconcilerError.configuration("there is no run \(runId)") }
        guard let target = targets.first(where: { $0.app.bundleId == run.bundleId && $0.app.environment == run.environment }) else {
            throw ReconcilerError.configuration("run \(runId) is for \(run.bundleId) in \(run.environment), which the configuration does not list")
        }
        return target
    }

    func run() async throws {
        let logger = logging.makeLogger()
        let (holder, runId, concurrency) = (ProcessIdentity.current, self.runId, self.concurrency)
        let loaded = try app.loadTargets(api: api)
        let target = try await runTarget(loaded, logger: logger)
        let (verifier, client) = (target.verifier, target.client)
        let giveUp = try GiveUpOption.policy(giveUpAfter, file: loaded.configuration.giveUpAfter)
        let progress = RunProgress()
        // SIGINT or SIGTERM stop the worker at a checkpoint; its customers go back to the queue.
        let sharing = [target.sharing([.getTransactionHistory, .getAllSubscriptionStatuses])]
        let interrupted = ReconcilerError(.interrupted, "interrupted; the customers this worker held are pending again")
        try await target.callingApple {
            try await database.runWork(logger: logger, sharing: sharing, interrupted: interrupted) { database in
                let worker = RunWorker(
                    configuration: .init(runId: runId, concurrency: concurrency, worker: holder, giveUp: giveUp),
                    scope: target.scope, database: database, verifier: verifier, client: client)
                let reporter = ProgressReporter(progress: progress, logger: logger, interval: .seconds(10))
                let progressTask = Task { await reporter.run() }
                defer { progressTask.cancel() }
                try await worker.work(progress: progress)
            }
        }
        let snapshot = progress.snapshot
        print(
            "worker \(holder) on run \(runId): \(Plural.count(snapshot.customersDoneHere, "customer")) done here, "
                + "\(snapshot.customersFailedHere) failed, \(Plural.count(client.statistics.snapshot.requests, "request"))")
        if snapshot.customersFailedHere > 0 {
            throw ReconcilerError.partial(
                "\(Plural.count(snapshot.customersFailedHere, "customer")) failed; `reconciler status --run \(runId)` lists them")
        }
    }
}
