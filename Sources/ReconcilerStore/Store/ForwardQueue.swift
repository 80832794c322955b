package import Foundation

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
    private let database: Database
    private let store: PurchaseStore

    package init(database: Database) {
        self.database = database
        self.store = PurchaseStore(logger: database.logger)
    }

    /// Leases the oldest due delivery for `target` with `token` (``PurchaseStore/leaseDelivery(target:worker:token:leaseDuration:on:)``).
    package func lease(target: ForwardingTarget, worker: String, token: UUID, leaseDuration: Duration) async throws -> PurchaseStore.Delivery? {
        try await database.transaction { [store] in
            try await store.leaseDelivery(target: target, worker: worker, token: token, leaseDuration: leaseDuration, on: $0)
        }
    }

    /// Extends the leases `worker` still holds; returns those (``PurchaseStore/renewDeliveryLeases(_:worker:leaseDuration:on:)``).
    package func renew(_ tokens: [UUID], worker: String, leaseDuration: Duration) async throws -> Set<UUID> {
        try await database.transaction { [store] in
            try await store.renewDeliveryLeases(tokens, worker: worker, leaseDuration: leaseDuration, on: $0)
        }
    }

    /// Records a delivery's answer; `false` when its lease had passed to another forwarder.
    package func record(_ delivery: PurchaseStore.Delivery, worker: String, result: PurchaseStore.DeliveryResult) async throws -> Bool {
        try await database.transaction { [store] in try await store.recordDelivery(delivery, worker: worker, result: result, on: $0) }
    }

    /// Releases the leases of workers that `isGone` says are gone.
    package func release(where isGone: @escaping @Sendable (String) -> Bool) async throws {
        try await database.transaction { [store] in try await store.releaseDeliveries(where: isGone, on: $0) }
    }

    /// Where the deliveries of `runIds` stand (`nil`: the whole queue).
    package func summary(runIds: [Int64]?) async throws -> PurchaseStore.ForwardingSummary {
        try await database.transaction { [store] in try await store.forwardingSummary(runIds: runIds, on: $0) }
    }

    /// How many deliveries of `runIds` for `target` are not delivered or failed yet.
    package func pending(target: ForwardingTarget, runIds: [Int64]?) async throws -> Int {
        try await database.transaction { [store] in try await store.pendingDeliveries(target: target, runIds: runIds, on: $0) }
    }

    /// Every target with deliveries waiting, and how many.
    package func waitingTargets() async throws -> [(target: ForwardingTarget, pending: Int)] {
        try await database.transaction { [store] in try await store.waitingTargets(on: $0) }
    }
}
