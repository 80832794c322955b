package import AppStoreServer
import Foundation
import Logging
package import ReconcilerDomain

/// One reconcile run at a time per app and environment, held as a lease row that this process
/// renews while the run works. A killed process, or one cut off from the database, stops
/// renewing; its lease runs out and the next run takes over. A process that cannot renew in time
/// stops its own run (it may no longer own it), and every checkpoint of a shard advances only
/// from the position it was read at, so two processes can never both apply a shard.
///
/// ```swift
/// let lease = RunLease(configuration: .init(), ledger: ledger)
/// let report = try await lease.withLease(app: AppTarget(bundleId: "com.example.app", environment: .production)) { lease in
///     lease.attach(runId: run.runId)
///     return try await work()
/// }
/// ```
package struct RunLease: Sendable {
    package struct Configuration: Sendable {
        /// How long the lease lasts without renewal.
        package var duration: Duration
        /// How often it is renewed.
        package var renewalInterval: Duration
        /// Wait for another holder's lease to end instead of failing.
        package var wait: Bool
        /// Names this process.
        package var holder: String
        /// The time renewals are spaced and the lease's end judged by (this process's: the
        /// database judges the row by its own).
        package var clock: any MonotonicClock

        package init(
            duration: Duration = .seconds(30), renewalInterval: Duration = .seconds(5), wait: Bool = false,
            holder: String = ProcessIdentity.current, clock: any MonotonicClock = .system
        ) {
            self.duration = duration
            self.renewalInterval = renewalInterval
            self.wait = wait
            self.holder = holder
            self.clock = clock
        }

        /// Whether a holder whose last successful renewal was at `renewedAt` must give the run up
        /// at `now`: one renewal interval before the lease could run out, so that no other run
        /// overlaps with this one.
        func mustStop(renewedAt: Duration, now: Duration) -> Bool {
            now - renewedAt >= duration - renewalInterval
        }
    }

    /// The run the lease belongs to, once known, so a second run's error can name it.
    package final class Handle: Sendable {
        package let runId = Locked<Int64?>(nil)
        package let record: @Sendable (Int64) async throws -> Void

        package init(record: @escaping @Sendable (Int64) async throws -> Void) {
            self.record = record
        }

        /// Names the run in the lease row.
        package func attach(runId: Int64) async throws {
            self.runId.withLock { $0 = runId }
            try await record(runId)
        }
    }

    package let configuration: Configuration
    package let ledger: RunLedger

    package init(configuration: Configuration, ledger: RunLedger) {
        self.configuration = configuration
        self.ledger = ledger
    }

    /// Runs `body` holding the lease; throws ``ReconcilerError/Code/leaseHeld`` when a live holder has it (unless `wait`), and
    /// ``ReconcilerError/Code/leaseLost`` (cancelling `body`) when it could not be renewed before it ran out.
    package func withLease<Result: Sendable>(
        app: AppTarget, onWait: @Sendable () -> Void = {},
        _ body: @Sendable (Handle) async throws -> Result
    ) async throws -> Result {
        let holder = configuration.holder
        var announced = false
        var dead: String?
        while let current = try await ledger.acquireRunLease(
            app: app, holder: holder, duration: configuration.duration, replacing: dead)
        {
            // A holder on this machine whose process is gone (killed, crashed) need not be waited out.
            if ProcessIdentity.isDeadOnThisHost(current.holder), dead != current.holder {
                ledger.logger.notice("taking over the run lease of a process that no longer runs", metadata: ["holder": "\(current.holder)"])
                dead = current.holder
                continue
            }
            guard configuration.wait else {
                var run: RunRecord?
                if let runId = current.runId { run = try? await ledger.run(id: runId) }
                throw Self.busy(holder: current, run: run)
            }
            if !announced {
                onWait()
                announced = true
            }
            try await configuration.clock.sleep(for: .seconds(1))
        }
        let handle = Handle { [ledger, configuration] runId in
            _ = try await ledger.renewRunLease(
                app: app, holder: configuration.holder,
                duration: configuration.duration, runId: runId)
        }
        do {
            let result = try await withoutActuallyEscaping(body) { body in
                try await withThrowingTaskGroup(of: Result?.self) { group in
                    group.addTask { try await body(handle) }
                    group.addTask {
                        try await keepRenewed(app: app, handle: handle)
                        return nil
                    }
                    defer { group.cancelAll() }
                    while let next = try await group.next() {
                        if let result = next { return result }
                    }
                    throw CancellationError()
                }
            }
            await release(app: app)
            return result
        } catch {
            await release(app: app)
            throw error
        }
    }

    /// Renews the lease until cancelled; throws ``ReconcilerError/Code/leaseLost`` when it could not be renewed in time.
    /// Cancellation ends it quietly, so the body's own way of stopping is what the caller sees.
    private func keepRenewed(app: AppTarget, handle: Handle) async throws {
        // A renewal waits for the database no longer than the lease can spare.
        let quick = RunLedger(database: ledger.database.with(unavailableTimeout: configuration.renewalInterval))
        let configuration = self.configuration
        try await Self.keepRenewed(configuration: configuration, logger: ledger.logger) {
            try await quick.renewRunLease(
                app: app, holder: configuration.holder, duration: configuration.duration,
                runId: handle.runId.withLock { $0 })
        }
    }

    /// Calls `renew` (which answers whether this process still holds the lease) every renewal
    /// interval of the configured clock until cancelled; throws ``ReconcilerError/Code/leaseLost`` when another process
    /// holds it, or when renewals failed until the lease could run out (``Configuration/mustStop(renewedAt:now:)``).
    static func keepRenewed(
        configuration: Configuration, logger: Logger, renew: @Sendable () async throws -> Bool
    ) async throws {
        let clock = configuration.clock
        var renewed = clock.now
        while true {
            do { try await clock.sleep(for: configuration.renewalInterval) } catch { return }
            do {
                guard try await renew() else { throw Self.lost(reason: "another process took it over") }
                renewed = clock.now
            } catch let error as ReconcilerError where error.code == .leaseLost {
                throw error
            } catch is CancellationError {
                return
            } catch {
                logger.warning("could not renew the run lease", metadata: ["error": "\(error)"])
                // Stop before the lease can run out, so no other run overlaps with this one.
                if configuration.mustStop(renewedAt: renewed, now: clock.now) { throw Self.lost(reason: "\(error)") }
            }
        }
    }

    /// Gives the lease up, briefly: a lease that cannot be released runs out by itself.
    private func release(app: AppTarget) async {
        let quick = RunLedger(database: ledger.database.with(unavailableTimeout: .seconds(2)))
        try? await Task.detached { [configuration] in
            try await quick.releaseRunLease(app: app, holder: configuration.holder)
        }.value
    }
}

extension RunLease {
    /// Another process holds the lease.
    static func busy(holder: RunLedger.LeaseHolder, run: RunRecord?) -> ReconcilerError {
        guard let run else {
            return ReconcilerError(
                .leaseHeld,
                "another reconcile run (\(ProcessIdentity.short(holder.holder))) holds the lease for this app and environment; try again later or pass --wait"
            )
        }
        return ReconcilerError(
            .leaseHeld,
            "run \(run.runId) holds the lease (window \(run.window), started \(run.startedAt), by \(ProcessIdentity.short(holder.holder))); "
                + "try again later or pass --wait", runId: run.runId)
    }

    /// This process could not renew its lease in time: another run may have taken over.
    static func lost(reason: String) -> ReconcilerError {
        ReconcilerError(.leaseLost, "this process lost the run lease (\(reason)); rerun to resume")
    }
}
