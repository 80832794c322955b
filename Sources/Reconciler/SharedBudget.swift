package import AppStoreServer
import Foundation
import Logging
package import ReconcilerDomain
package import ReconcilerStore

/// One App Store request budget for every process of an app and environment (`run`, `work`,
/// `repair`, `detect-outage`, `check-webhook`), kept in PostgreSQL: each live process holds a
/// lease row that names the endpoints it calls, with the app's budget and its own cap for each.
/// Per endpoint, the app's budget is divided among the live processes that call it
/// (``BudgetAllocation``); a process that joins or leaves makes the others re-divide at once
/// (`NOTIFY`); one that dies stops renewing, and its share returns when its lease runs out.
/// A 429's `Retry-After` closes the endpoint for every process, including ones started later.
///
/// It fails closed: a process spends only while the others count it. Until it has joined, and
/// from the moment its lease would have run out without a successful renewal (the others then
/// divide the budget without it), it pauses the endpoints it calls; the next successful renewal
/// gives it its share again. While renewals fail but the lease still holds, it keeps its share.
///
/// ```swift
/// let budget = SharedBudget(
///     configuration: .init(claims: RequestBudget(environment: .production, appRequestsPerSecond: 40).claims([.getTransactionHistory])),
///     database: database, limiter: client.rateLimiter, app: AppTarget(bundleId: "com.example.app", environment: .production))
/// try await budget.join()          // before the first request
/// try await budget.keepShared()    // until cancelled; then budget.leave()
/// ```
package final class SharedBudget: RateLimiter.Observer, Sendable {
    package struct Configuration: Sendable {
        /// The endpoints this process calls, each with the app's budget and this process's cap.
        package var claims: [AppStoreServerAPIEndpoint: BudgetAllocation.Claim]
        /// How long a process's lease lasts without renewal.
        package var leaseDuration: Duration
        /// How often it is renewed and the share recomputed.
        package var renewalInterval: Duration
        /// Names this process.
        package var process: String
        /// The time renewals and the lease's end are judged by.
        package var clock: any MonotonicClock

        package init(
            claims: [AppStoreServerAPIEndpoint: BudgetAllocation.Claim], leaseDuration: Duration = .seconds(5),
            renewalInterval: Duration = .seconds(1), process: String = ProcessIdentity.current, clock: any MonotonicClock = .system
        ) {
            self.claims = claims
            self.leaseDuration = leaseDuration
            self.renewalInterval = renewalInterval
            self.process = process
            self.clock = clock
        }
    }

    /// Where this process's lease stands, as of its last renewal.
    struct Lease: Sendable {
        /// When the lease runs out unless renewed again (the start of the last successful renewal
        /// plus the lease's duration, on the configured clock); `nil` before the first.
        var expires: Duration?
        /// The clock's time at the start of the renewal the shares come from.
        var renewedAt: Duration?
        /// This process's share of each endpoint it calls.
        var shares: [AppStoreServerAPIEndpoint: Double] = [:]
        /// The live processes of the app at the last renewal, this one included.
        var processes = 1
        /// Renewals that failed since the last one that succeeded.
        var failedRenewals = 0

        /// Whether the lease holds at `now`: the others count this process until it runs out.
        func holds(at now: Duration) -> Bool { expires.map { now < $0 } ?? false }
    }

    package let configuration: Configuration
    /// Renewals wait for the database no longer than the lease lasts.
    let ledger: RunLedger
    /// Joining waits for the database as long as any of the process's work does.
    let joiningLedger: RunLedger
    let limiter: RateLimiter
    /// The app and environment whose budget is shared.
    let app: AppTarget
    let logger: Logger
    let lease = Locked(Lease())

    package init(configuration: Configuration, database: Database, limiter: RateLimiter, app: AppTarget) {
        self.configuration = configuration
        self.ledger = RunLedger(database: database.with(unavailableTimeout: configuration.leaseDuration))
        self.joiningLedger = RunLedger(database: database)
        self.limiter = limiter
        self.app = app
        self.logger = database.logger
    }

    /// The live processes at the last renewal (this one included).
    var processes: Int { lease.withLock { $0.processes } }

    /// Registers this process, takes its share and closes the endpoints other processes saw closed,
    /// before the first request; tells the others to re-divide. When it cannot (it waits for the
    /// database as long as the database's `unavailableTimeout`), it throws and the endpoints this
    /// process calls stay paused: a process that has not joined must not call Apple.
    package func join() async throws {
        await limiter.observe(with: self)
        try await renew(announce: true, through: joiningLedger)
    }

    /// Renews the lease and follows the others (closures, processes joining and leaving) until
    /// cancelled, then leaves. Pauses this process's endpoints once its lease runs out unrenewed.
    package func keepShared() async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.listen() }
            group.addTask { await self.keepRenewing() }
            group.addTask { await self.pauseWhenTheLeaseRunsOut() }
            await group.next()
            group.cancelAll()
        }
        await leave()
    }

    /// Keeps this process's share (after ``join()``) while `work` runs, and gives it back as soon
    /// as `work` ends: for work that calls Apple now and then (a target's runs, serve's leader's
    /// automatic consumption answers), so the app's other processes get the share back between.
    package func keepingShared<Result: Sendable>(_ work: () async throws -> Result) async throws -> Result {
        try await withThrowingTaskGroup(of: Void.self, returning: Result.self) { group in
            group.addTask { await self.keepShared() }
            defer { group.cancelAll() }
            return try await work()
        }
    }

    /// Gives the lease up (briefly: a lease that cannot be released runs out by itself).
    package func leave() async {
        let (ledger, app, process) = (RunLedger(database: ledger.database.with(unavailableTimeout: .seconds(2))), self.app, configuration.process)
        try? await Task.detached {
            try await BudgetLedger(database: ledger.database).releaseBudgetLease(app: app, process: process)
        }.value
    }

    /// A 429 here closes the endpoint for every process of the app.
    package func endpointClosed(_ endpoint: AppStoreServerAPIEndpoint, untilUNIXMilliseconds milliseconds: Int64) async {
        do {
            try await BudgetLedger(database: ledger.database).closeEndpoint(
                app: app, endpoint: endpoint.name, untilMilliseconds: milliseconds)
        } catch {
            logger.warning("could not share an endpoint's Retry-After", metadata: ["endpoint": "\(endpoint.name)", "error": "\(error)"])
        }
    }

    /// Renews the lease, takes this process's share of each endpoint it calls, and closes what
    /// other processes closed. A failed renewal pauses the endpoints once the lease has run out.
    func renew(announce: Bool, through ledger: RunLedger? = nil) async throws {
        let started = configuration.clock.now
        let declaration = Dictionary(uniqueKeysWithValues: configuration.claims.map { ($0.key.name, $0.value) })
        // A process the others may have divided the budget without tells them it is back.
        let rejoining = lease.withLock { !$0.holds(at: started) }
        do {
            let live = try await BudgetLedger(database: (ledger ?? self.ledger).database).renewBudgetLease(
                app: app, process: configuration.process, declaration: declaration,
                duration: configuration.leaseDuration, announce: announce || rejoining)
            let shares = BudgetAllocation.shares(of: configuration.process, among: live)
            lease.withLock { lease in
                lease.failedRenewals = 0
                // Of two renewals that overlap, the one started later holds the newer view.
                if let renewedAt = lease.renewedAt, renewedAt > started { return }
                lease.renewedAt = started
                lease.expires = started + configuration.leaseDuration
                lease.processes = max(live.count, 1)
                lease.shares = [:]
                for (endpoint, _) in configuration.claims { lease.shares[endpoint] = shares[endpoint.name] ?? 0 }
            }
        } catch {
            if !(error is CancellationError) { lease.withLock { $0.failedRenewals += 1 } }
            await spendShare()
            throw error
        }
        await spendShare()
        try await applyClosures()
    }

    /// What this process may spend now: its share while its lease holds, nothing (paused) before
    /// it has joined and once its lease has run out without a successful renewal.
    func share(at now: Duration) -> RateLimiter.Share {
        lease.withLock { lease in
            guard lease.holds(at: now) else {
                return RateLimiter.Share(requestsPerSecond: [:], paused: Set(configuration.claims.keys))
            }
            // A share of nothing (this process missing from the live ones) pauses the endpoint too.
            return RateLimiter.Share(requestsPerSecond: lease.shares, paused: Set(configuration.claims.keys.filter { (lease.shares[$0] ?? 0) <= 0 }))
        }
    }

    /// Hands the limiter the share as it stands when the limiter applies it, so of two calls
    /// that overtake each other the newer state wins.
    private func spendShare() async {
        await limiter.setShare { [self] in share(at: configuration.clock.now) }
    }

    private func keepRenewing() async {
        while !Task.isCancelled {
            do {
                try await configuration.clock.sleep(for: configuration.renewalInterval)
                try await renew(announce: false)
            } catch is CancellationError {
                return
            } catch {
                logger.warning(
                    "could not renew the shared request budget's lease", metadata: ["error": "\(error)", "paused": "\(paused)"])
            }
        }
    }

    /// Whether the lease has run out (this process spends nothing until it renews).
    private var paused: Bool { lease.withLock { !$0.holds(at: configuration.clock.now) } }

    /// Pauses this process's endpoints when its lease runs out without a successful renewal, even
    /// while a renewal still waits for the database.
    private func pauseWhenTheLeaseRunsOut() async {
        let clock = configuration.clock
        while !Task.isCancelled {
            let expires = lease.withLock { $0.expires }
            do {
                if let expires, clock.now < expires {
                    try await clock.sleep(until: expires)
                } else {
                    try await clock.sleep(for: configuration.renewalInterval)
                }
            } catch {
                return
            }
            await spendShare()
        }
    }

    private func applyClosures() async throws {
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        for (name, until) in try await BudgetLedger(database: ledger.database).closedEndpoints(app: app, now: now) {
            guard let endpoint = AppStoreServerAPIEndpoint.all.first(where: { $0.name == name }) else { continue }
            await limiter.closeFromElsewhere(endpoint, untilUNIXMilliseconds: until)
        }
    }

    /// Follows the others at once: a closure or a process joining or leaving is applied when its
    /// notification arrives (the renewal loop catches up on anything missed, e.g. through PgBouncer).
    private func listen() async {
        while !Task.isCancelled {
            do {
                try await ledger.database.listen(on: BudgetLedger.budgetChannel) { notifications in
                    for try await notification in notifications {
                        if notification.hasPrefix("closed") { try await applyClosures() } else { try await renew(announce: false) }
                    }
                }
            } catch is CancellationError {
                return
            } catch {
                logger.debug("listening for the shared budget stopped; retrying", metadata: ["error": "\(error)"])
                try? await configuration.clock.sleep(for: configuration.renewalInterval)
            }
        }
    }
}
