package import AppStoreServer
package import Foundation
import Logging
package import ReconcilerDomain

/// The forwarding queue as a forwarder works it: each operation is one short transaction of its
/// own, so the forwarder knows nothing of PostgreSQL and never holds a transaction while it sends.
///
/// ```swift
/// let queue = ForwardQueue(database: database)
/// if let delivery = try await queue.lease(target: target, worker: "forwarder-1", token: UUID(), leaseDuration: .seconds(30)) {
///     let result = await send(delivery)
///     _ = try await queue.record(delivery, worker: "forwarder-1", result: result)
/// }
/// ```
package struct ForwardQueue: Sendable {
    let database: Database
    var logger: Logger { database.logger }

    package init(database: Database) {
        self.database = database
    }

    /// Leases the oldest due delivery for `target` with `token` (``leaseDelivery(target:worker:token:leaseDuration:dueBy:on:)``).
    package func lease(
        target: ForwardingTarget, worker: String, token: UUID, leaseDuration: Duration, dueBy: Date? = nil
    ) async throws -> ForwardQueue.Delivery? {
        try await database.transaction { [self] in
            try await self.leaseDelivery(target: target, worker: worker, token: token, leaseDuration: leaseDuration, dueBy: dueBy, on: $0)
        }
    }

    /// The database's clock, which the queue's times (`next_attempt_at`, `lease_until`) are judged by.
    package func databaseTime() async throws -> Date {
        try await database.transaction { [self] in try await self.now(on: $0) }
    }

    /// Makes the deliveries a run held back due now (``releaseHeldDeliveries(runId:on:)``); returns how many.
    package func releaseHeld(runId: Int64) async throws -> Int {
        try await database.transaction { [self] in try await self.releaseHeldDeliveries(runId: runId, on: $0) }
    }

    /// Extends the leases `worker` still holds; returns those (``renewDeliveryLeases(_:worker:leaseDuration:on:)``).
    package func renew(_ tokens: [UUID], worker: String, leaseDuration: Duration) async throws -> Set<UUID> {
        try await database.transaction { [self] in
            try await self.renewDeliveryLeases(tokens, worker: worker, leaseDuration: leaseDuration, on: $0)
        }
    }

    /// Records a delivery's answer; `false` when its lease had passed to another forwarder.
    package func record(_ delivery: ForwardQueue.Delivery, worker: String, result: ForwardQueue.DeliveryResult) async throws -> Bool {
        try await database.transaction { [self] in try await self.recordDelivery(delivery, worker: worker, result: result, on: $0) }
    }

    /// Releases the leases of workers that `isGone` says are gone.
    package func release(where isGone: @escaping @Sendable (String) -> Bool) async throws {
        try await database.transaction { [self] in try await self.releaseDeliveries(where: isGone, on: $0) }
    }

    /// Where the deliveries of `runIds` stand (`nil`: the whole queue).
    package func summary(runIds: [Int64]?) async throws -> ForwardQueue.ForwardingSummary {
        try await database.transaction { [self] in try await self.forwardingSummary(runIds: runIds, on: $0) }
    }

    /// How many failed deliveries can never be sent as they are: their stored payload cannot be rebuilt.
    package func unrebuildable() async throws -> Int {
        try await database.transaction { [self] in try await self.unrebuildableFailures(on: $0) }
    }

    /// Where the deliveries of `app`'s notifications stand, per webhook (``forwardingSummaries(of:on:)``).
    package func summaries(of app: AppTarget) async throws -> [ForwardQueue.TargetSummary] {
        try await database.transaction { [self] in try await self.forwardingSummaries(of: app, on: $0) }
    }

    /// How many deliveries of `runIds` for `target` are not delivered or failed yet.
    package func pending(target: ForwardingTarget, runIds: [Int64]?) async throws -> Int {
        try await database.transaction { [self] in try await self.pendingDeliveries(target: target, runIds: runIds, on: $0) }
    }

    /// The runs whose deliveries for `target` still wait (``runsWithWaitingDeliveries(target:on:)``).
    package func runsWaiting(target: ForwardingTarget) async throws -> [Int64] {
        try await database.transaction { [self] in try await self.runsWithWaitingDeliveries(target: target, on: $0) }
    }

    /// Makes failed deliveries for `target` due again; returns how many.
    package func retryFailed(target: ForwardingTarget) async throws -> Int {
        try await database.transaction { [self] in try await self.retryFailedDeliveries(target: target, on: $0) }
    }

    /// Every target with deliveries waiting, and how many.
    package func waitingTargets() async throws -> [(target: ForwardingTarget, pending: Int)] {
        try await database.transaction { [self] in try await self.waitingTargets(on: $0) }
    }
}
