import AppStoreServer
import ArgumentParser
import Foundation
import Logging
import Reconciler

struct WorkCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "work",
        abstract: "Join a run's phase 2 (the per-customer transaction history) from another machine.",
        discussion: """
            Workers share the run's customer queue in PostgreSQL (FOR UPDATE SKIP LOCKED): start as many as the \
            rate budget allows, each with its share of --rate-limit. It waits while the run is still in phase 1, \
            then works until no customer is left. Configure it like the run (same app, environment and database).
            Exit 0 when the queue is done; 2 when customers this worker took failed.

              reconciler work --run 42 --rate-limit 10
            """)

    @Option(name: .customLong("run"), help: ArgumentHelp("The run to join.", valueName: "id")) var runId: Int64
    @Option(help: ArgumentHelp("Customers processed at once (default 8).", valueName: "n")) var concurrency: Int = 8

    @OptionGroup var app: AppOptions
    @OptionGroup var api: APIOptions
    @OptionGroup var database: DatabaseOptions
    @OptionGroup var logging: LoggingOptions

    func run() async throws {
        let logger = logging.makeLogger()
        let verifier = try app.verifier()
        let client = try api.client(app: app)
        let holder = "\(ProcessInfo.processInfo.hostName):\(ProcessInfo.processInfo.processIdentifier)"
        let failed = try await database.withClient(logger: logger) { postgres -> Int in
            do { try await Migrator().requireCurrent(postgres, logger: logger) }
            catch let error as Migrator.MigrationError { throw CommandError.configuration(error.description) }
            let ledger = RunLedger(client: postgres, logger: logger)
            guard var run = try await ledger.run(id: runId) else { throw CommandError.configuration("there is no run \(runId)") }
            guard run.environment == verifier.configuration.environment.rawValue, run.bundleId == verifier.configuration.bundleId else {
                throw CommandError.configuration("run \(runId) is for \(run.bundleId) in \(run.environment), not the configured \(verifier.configuration.bundleId) in \(verifier.configuration.environment.rawValue)")
            }
            while run.phase == .replay {
                guard run.status == .running else {
                    throw CommandError.configuration("run \(runId) is \(run.status.rawValue) in phase 1; rerun it with `reconciler run` first")
                }
                logger.info("waiting for the run to finish phase 1", metadata: ["runId": "\(runId)"])
                try await Task.sleep(for: .seconds(2))
                run = try await ledger.run(id: runId) ?? run
            }
            let progress = RunProgress()
            let filler = GapFiller(
                configuration: .init(runId: runId, environment: run.environment, dryRun: run.dryRun, refreshStatus: run.options.refreshStatus,
                                     concurrency: concurrency, worker: holder),
                verifier: verifier, client: client, database: Database(client: postgres, logger: logger), ledger: ledger,
                progress: progress, logger: logger)
            let reporter = ProgressReporter(progress: progress, logger: logger, interval: .seconds(10))
            let progressTask = Task { await reporter.run() }
            defer { progressTask.cancel() }
            do {
                try await cancellingOnSignals { try await filler.run() }
            } catch let error as AppStoreServerAPIError {
                if case .unauthorized = error { throw CommandError.configuration(error.operatorDescription) }
                throw error
            } catch is Interrupted {
                try? await ledger.addAPIStatistics(runId: runId, client.statistics.snapshot)
                throw CommandError.partial("interrupted; the customers this worker held are pending again")
            }
            try await ledger.addAPIStatistics(runId: runId, client.statistics.snapshot)
            let snapshot = progress.snapshot
            print("worker \(holder) on run \(runId): \(snapshot.customersDone) customers done here, \(snapshot.customersFailed) failed, "
                  + "\(client.statistics.snapshot.requests) requests")
            return snapshot.customersFailed
        }
        if failed > 0 { throw CommandError.partial("\(failed) customers failed; `reconciler status --run \(runId)` lists them") }
    }
}
