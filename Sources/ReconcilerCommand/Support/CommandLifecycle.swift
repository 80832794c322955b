import Foundation
import Logging
import Reconciler
import ReconcilerDomain
import ReconcilerStore
import ServiceLifecycle
import Synchronization
import UnixSignals

/// A batch command's work (a run, a worker) as a service beside the ``Database``'s pool, once the
/// schema is checked (``Migrator/requireCurrent(_:)``: the work needs it current), in one
/// `ServiceGroup` that SIGTERM and SIGINT shut down gracefully: the work first (it is cancelled,
/// stops at a checkpoint and records how it stopped while the pool still runs), then the pool.
/// Whatever the work waits on, the process ends within `stopTimeout` of the signal: if it has not
/// stopped by then it exits with status 2, which loses nothing a killed run would not.
///
/// ```swift
/// let report = try await CommandLifecycle(database: database, logger: logger).run { try await run.reconcile(progress: progress) }
/// ```
struct CommandLifecycle: Sendable {
    /// The database the work uses; its pool runs as a service of the group.
    let database: Database
    let logger: Logger
    /// The request budgets shared with each app's other processes, when the work calls Apple.
    var budgets: [SharedBudget] = []
    var stopTimeout: Duration = .seconds(10)
    /// What a signal that stopped the work means for this command (what is kept, how to go on);
    /// its code is always ``ReconcilerError/Code/interrupted``.
    var interruption: ReconcilerError = .interruption
    /// Whether the work watches for the signal itself (`Task.isShuttingDownGracefully`: a
    /// forwarder finishes the delivery in flight and records its answer) and ends as usual, instead
    /// of being cancelled. The stop timeout still holds.
    var workStopsGracefully = false

    /// Runs `work` to its end; a signal cancels it, and it ends with ``interruption`` (or, when
    /// ``workStopsGracefully``, with what the work returns).
    func run<Result: Sendable>(_ work: @escaping @Sendable () async throws -> Result) async throws -> Result {
        let (budgets, logger, database, interruption) = (self.budgets, self.logger, self.database, self.interruption)
        let workStopsGracefully = self.workStopsGracefully
        let service = WorkService(
            work: {
                // The schema first (every command's work needs it, and the budget's table does not
                // exist before `reconciler migrate`): that one line is all the operator needs to read.
                try await Migrator().requireCurrent(database)
                do {
                    for budget in budgets { try await budget.join() }
                } catch let error where !(error is CancellationError) {
                    // Without a lease the others do not count this process: it must not call Apple.
                    logger.error("could not join the request budget shared with the app's other processes", metadata: ["error": "\(error)"])
                    throw error
                }
                return try await work()
            }, stopTimeout: stopTimeout, cancelledOnShutdown: !workStopsGracefully)
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [.init(service: database)]
        for budget in budgets {
            // The share and the closures are known before the first request; the budget is left after the work.
            services.append(.init(service: BudgetService(budget: budget)))
        }
        services.append(
            .init(
                service: service, successTerminationBehavior: .gracefullyShutdownGroup,
                failureTerminationBehavior: .gracefullyShutdownGroup))
        let group = ServiceGroup(configuration: .init(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
        switch service.outcome.withLock({ $0 }) {
        case .success(let result)?: return result
        case .failure(let error as CancellationError)?: throw service.signalled.load(ordering: .relaxed) ? interruption : error
        case .failure(let error as ReconcilerError)? where error.code == .interrupted: throw interruption
        case .failure(let error)?: throw error
        case nil: throw interruption
        }
    }
}

/// Keeps the shared budget's lease while the group runs; joins before the work's first request.
private struct BudgetService: Service {
    let budget: SharedBudget

    func run() async throws {
        await cancelWhenGracefulShutdown { await budget.keepShared() }
    }
}

/// The work, cancelled when the group shuts down gracefully; its outcome is kept for the caller.
private final class WorkService<Result: Sendable>: Service, Sendable {
    let work: @Sendable () async throws -> Result
    let stopTimeout: Duration
    /// Whether a graceful shutdown cancels the work (else the work sees it and ends itself).
    let cancelledOnShutdown: Bool
    let outcome = Mutex<Swift.Result<Result, any Error>?>(nil)
    let signalled = Atomic<Bool>(false)

    init(work: @escaping @Sendable () async throws -> Result, stopTimeout: Duration, cancelledOnShutdown: Bool) {
        self.work = work
        self.stopTimeout = stopTimeout
        self.cancelledOnShutdown = cancelledOnShutdown
    }

    func run() async throws {
        let (stopTimeout, work, cancelledOnShutdown) = (self.stopTimeout, self.work, self.cancelledOnShutdown)
        do {
            let result = try await withGracefulShutdownHandler {
                cancelledOnShutdown ? try await cancelWhenGracefulShutdown(work) : try await work()
            } onGracefulShutdown: {
                self.signalled.store(true, ordering: .relaxed)
                // The watchdog outlives the group: a wait that ignores cancellation cannot keep the process.
                Task.detached {
                    try await Task.sleep(for: stopTimeout)
                    FileHandle.standardError.write(
                        Data(
                            "stopping now: it did not stop within \(stopTimeout.components.seconds) s of the signal; rerun the same command to resume from the last checkpoint\n"
                                .utf8))
                    exit(2)
                }
            }
            outcome.withLock { $0 = .success(result) }
        } catch {
            // The group must still shut the pool down after the work, so the error is kept, not thrown.
            outcome.withLock { $0 = .failure(error) }
        }
    }
}
