import AppStoreServer
import Foundation
import Logging
import PostgresNIO

/// One App Store request budget for every process of an app and environment (`run`, `work`,
/// `repair`, `detect-outage`, `check-webhook`), kept in PostgreSQL: each live process holds a
/// lease row with the budget it was configured with, and spends an equal share of the smallest
/// budget any live process declares. A process that joins or leaves makes the others re-divide
/// at once (`NOTIFY`); one that dies stops renewing, and its share returns when its lease runs out.
/// A 429's `Retry-After` closes the endpoint for every process, including ones started later.
///
/// ```swift
/// let budget = SharedBudget(database: database, limiter: client.rateLimiter, environment: .production, bundleId: "com.example.app")
/// try await budget.join()          // before the first request
/// try await budget.keepShared()    // until cancelled; then budget.leave()
/// ```
public final class SharedBudget: RateLimiter.Observer, Sendable {
    public struct Configuration: Sendable {
        /// How long a process's lease lasts without renewal.
        public var leaseDuration: Duration
        /// How often it is renewed and the share recomputed.
        public var renewalInterval: Duration
        /// Names this process.
        public var process: String

        public init(leaseDuration: Duration = .seconds(5), renewalInterval: Duration = .seconds(1), process: String = ProcessIdentity.current) {
            self.leaseDuration = leaseDuration
            self.renewalInterval = renewalInterval
            self.process = process
        }
    }

    public let configuration: Configuration
    let ledger: RunLedger
    let limiter: RateLimiter
    let environment: String
    let bundleId: String
    let logger: Logger
    /// The live processes now (this one included): `status` shows it, tests read it.
    let processes = Locked(1)

    public init(configuration: Configuration = .init(), database: Database, limiter: RateLimiter, environment: AppStoreEnvironment, bundleId: String)
    {
        self.configuration = configuration
        self.ledger = RunLedger(database: database.with(unavailableTimeout: configuration.leaseDuration))
        self.limiter = limiter
        self.environment = environment.rawValue
        self.bundleId = bundleId
        self.logger = database.logger
    }

    /// The budget this process was configured with, by endpoint name.
    var declared: [String: Double] {
        Dictionary(uniqueKeysWithValues: limiter.requestsPerSecond.map { ($0.key.name, $0.value) })
    }

    /// Registers this process, takes its share and closes the endpoints other processes saw closed,
    /// before the first request; tells the others to re-divide.
    public func join() async throws {
        await limiter.observe(with: self)
        try await renew(announce: true)
    }

    /// Renews the lease and follows the others (closures, processes joining and leaving) until
    /// cancelled, then leaves.
    public func keepShared() async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.listen() }
            group.addTask {
                while !Task.isCancelled {
                    do {
                        try await Task.sleep(for: self.configuration.renewalInterval)
                        try await self.renew(announce: false)
                    } catch is CancellationError {
                        return
                    } catch {
                        self.logger.warning("could not renew the shared request budget's lease", metadata: ["error": "\(error)"])
                    }
                }
            }
            await group.next()
            group.cancelAll()
        }
        await leave()
    }

    /// Gives the lease up (briefly: a lease that cannot be released runs out by itself).
    public func leave() async {
        let (ledger, environment, bundleId, process) = (
            RunLedger(database: ledger.database.with(unavailableTimeout: .seconds(2))), self.environment, self.bundleId, configuration.process
        )
        try? await Task.detached { try await ledger.releaseBudgetLease(environment: environment, bundleId: bundleId, process: process) }.value
    }

    /// A 429 here closes the endpoint for every process of the app.
    public func endpointClosed(_ endpoint: AppStoreServerAPIEndpoint, untilUNIXMilliseconds milliseconds: Int64) async {
        do {
            try await ledger.closeEndpoint(environment: environment, bundleId: bundleId, endpoint: endpoint.name, untilMilliseconds: milliseconds)
        } catch {
            logger.warning("could not share an endpoint's Retry-After", metadata: ["endpoint": "\(endpoint.name)", "error": "\(error)"])
        }
    }

    /// Renews the lease, takes this process's share of the smallest declared budget, and closes
    /// what other processes closed.
    func renew(announce: Bool) async throws {
        let budgets = try await ledger.renewBudgetLease(
            environment: environment, bundleId: bundleId, process: configuration.process, budget: declared,
            duration: configuration.leaseDuration, announce: announce)
        let count = max(budgets.count, 1)
        processes.withLock { $0 = count }
        var shares: [AppStoreServerAPIEndpoint: Double] = [:]
        for endpoint in AppStoreServerAPIEndpoint.all {
            guard let own = declared[endpoint.name] else { continue }
            let smallest = budgets.compactMap { $0[endpoint.name] }.min() ?? own
            shares[endpoint] = min(own, smallest) / Double(count)
        }
        await limiter.setRequestsPerSecond(shares)
        try await applyClosures()
    }

    private func applyClosures() async throws {
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        for (name, until) in try await ledger.closedEndpoints(environment: environment, bundleId: bundleId, now: now) {
            guard let endpoint = AppStoreServerAPIEndpoint.all.first(where: { $0.name == name }) else { continue }
            await limiter.closeFromElsewhere(endpoint, untilUNIXMilliseconds: until)
        }
    }

    /// Follows the others at once: a closure or a process joining or leaving is applied when its
    /// notification arrives (the renewal loop catches up on anything missed, e.g. through PgBouncer).
    private func listen() async {
        while !Task.isCancelled {
            do {
                try await ledger.database.listen(on: RunLedger.budgetChannel) { notifications in
                    for try await notification in notifications {
                        if notification.payload.hasPrefix("closed") { try await applyClosures() } else { try await renew(announce: false) }
                    }
                }
            } catch is CancellationError {
                return
            } catch {
                logger.debug("listening for the shared budget stopped; retrying", metadata: ["error": "\(error)"])
                try? await Task.sleep(for: configuration.renewalInterval)
            }
        }
    }
}
