import AppStoreServer
import Foundation
import PostgresNIO
import ReconcilerDomain
import TestSupport
import Testing

@testable import Reconciler

/// The shared request budget through PostgreSQL with real ``SharedBudget`` instances: shares and
/// pauses, read from the limiters; time only on an injected clock.
@Suite struct SharedBudgetTests {
    static let run: [AppStoreServerAPIEndpoint] = [.getNotificationHistory, .getTransactionHistory, .getAllSubscriptionStatuses]
    static let work: [AppStoreServerAPIEndpoint] = [.getTransactionHistory, .getAllSubscriptionStatuses]

    /// Leases last longer than any test (PostgreSQL judges them by its own clock), unless a test
    /// moves time itself.
    static func budget(
        _ process: String, _ db: TestDatabase, endpoints: [AppStoreServerAPIEndpoint], cap: Double? = nil,
        leaseDuration: Duration = .seconds(600), clock: any MonotonicClock = .system
    ) -> SharedBudget {
        let budget = RequestBudget(environment: .production, appRequestsPerSecond: 40, cap: cap)
        return SharedBudget(
            configuration: .init(claims: budget.claims(endpoints), leaseDuration: leaseDuration, process: process, clock: clock),
            database: db.database, limiter: RateLimiter(requestsPerSecond: budget.alone),
            app: AppTarget(bundleId: "com.example", environment: .production))
    }

    /// A run and three `work --rate-limit 10` workers, app budget 40: the workers never call Get
    /// Notification History, so the run spends all of it; on Get Transaction History the four
    /// shares add up to the budget.
    @Test func eachEndpointIsSharedOnlyByTheProcessesThatUseIt() async throws {
        try await TestDatabase.with { db in
            let run = Self.budget("run", db, endpoints: Self.run)
            let workers = (1...3).map { Self.budget("worker-\($0)", db, endpoints: Self.work, cap: 10) }
            try await run.join()
            for worker in workers { try await worker.join() }
            for process in [run] + workers { try await process.renew(announce: false) }
            #expect(run.processes == 4)
            #expect(await run.limiter.requestsPerSecond(of: .getNotificationHistory) == 40)
            var history = await run.limiter.requestsPerSecond(of: .getTransactionHistory) ?? 0
            for worker in workers { history += await worker.limiter.requestsPerSecond(of: .getTransactionHistory) ?? 0 }
            #expect(history == 40)
            // Look Up Order ID is nobody's here: no share of it is taken.
            #expect(await run.limiter.requestsPerSecond(of: .lookUpOrderId) == 8)
        }
    }

    /// A worker's cap limits that worker alone: an uncapped run and three workers capped at 5
    /// spend 25 + 5 + 5 + 5; when the workers leave, the run spends the whole budget again.
    @Test func whatACappedWorkerLeavesGoesToTheOthers() async throws {
        try await TestDatabase.with { db in
            let run = Self.budget("run", db, endpoints: Self.run)
            let workers = (1...3).map { Self.budget("worker-\($0)", db, endpoints: Self.work, cap: 5) }
            try await run.join()
            for worker in workers { try await worker.join() }
            try await run.renew(announce: false)
            #expect(await run.limiter.requestsPerSecond(of: .getTransactionHistory) == 25)
            for worker in workers { #expect(await worker.limiter.requestsPerSecond(of: .getTransactionHistory) == 5) }
            for worker in workers { await worker.leave() }
            try await run.renew(announce: false)
            #expect(run.processes == 1)
            #expect(await run.limiter.requestsPerSecond(of: .getTransactionHistory) == 40)
        }
    }

    /// A process that cannot join spends nothing (it is not counted by the others); once it
    /// renews, it spends its share.
    @Test func aProcessThatCannotJoinSpendsNothing() async throws {
        try await TestDatabase.with { db in
            let budget = Self.budget("run", db, endpoints: Self.run)
            try await db.execute("ALTER TABLE api_processes RENAME TO api_processes_away")
            await #expect(throws: (any Error).self) { try await budget.join() }
            for endpoint in Self.run {
                #expect(await budget.limiter.isPaused(endpoint))
                #expect(await budget.limiter.requestsPerSecond(of: endpoint) == 0)
            }
            // Endpoints it does not call are not its to pause.
            #expect(await !budget.limiter.isPaused(.lookUpOrderId))
            try await db.execute("ALTER TABLE api_processes_away RENAME TO api_processes")
            try await budget.renew(announce: false)
            #expect(await !budget.limiter.isPaused(.getTransactionHistory))
            #expect(await budget.limiter.requestsPerSecond(of: .getTransactionHistory) == 40)
        }
    }

    /// While its renewals fail, a process keeps its share as long as its lease holds (the others
    /// still count it); once the lease would have run out it pauses, until a renewal succeeds.
    /// Time moves only on the test's clock.
    @Test func aProcessWhoseLeaseRunsOutUnrenewedPausesUntilItRenews() async throws {
        try await TestDatabase.with { db in
            let clock = ManualClock()
            let budget = Self.budget("run", db, endpoints: Self.run, leaseDuration: .seconds(5), clock: clock)
            // Another live process: its lease outlasts the test, however slow the machine.
            let other = Self.budget("worker", db, endpoints: Self.work)
            try await other.join()
            try await budget.join()
            #expect(await budget.limiter.requestsPerSecond(of: .getTransactionHistory) == 20)
            let sharing = Task { await budget.keepShared() }
            defer { sharing.cancel() }
            // The renewal loop and the fail-safe wait on the clock.
            try await eventually("the renewal loop and the fail-safe to wait") { clock.sleepers == 2 }
            try await db.execute("ALTER TABLE api_processes RENAME TO api_processes_away")
            for second in 1...4 {
                clock.advance(by: .seconds(1))
                try await eventually("renewal \(second) to fail") {
                    budget.lease.withLock { $0.failedRenewals } == second && clock.sleepers == 2
                }
                #expect(await !budget.limiter.isPaused(.getTransactionHistory), "paused \(second) s after the last renewal")
                #expect(await budget.limiter.requestsPerSecond(of: .getTransactionHistory) == 20)
            }
            // Five seconds after the last renewal began, the lease has run out: the others divide
            // the budget without this process, and it spends nothing.
            clock.advance(by: .seconds(1))
            try await eventually("the process to pause") {
                await Self.run.asyncAllSatisfy { await budget.limiter.isPaused($0) }
            }
            #expect(await budget.limiter.requestsPerSecond(of: .getNotificationHistory) == 0)
            try await db.execute("ALTER TABLE api_processes_away RENAME TO api_processes")
            clock.advance(by: .seconds(1))
            try await eventually("a renewal to give the share back") { await !budget.limiter.isPaused(.getTransactionHistory) }
            #expect(budget.lease.withLock { $0.failedRenewals } == 0)
            #expect(await budget.limiter.requestsPerSecond(of: .getTransactionHistory) == 20)
            #expect(await budget.limiter.requestsPerSecond(of: .getNotificationHistory) == 40)
            sharing.cancel()
            await sharing.value
            #expect(try await db.count("SELECT count(*) FROM api_processes WHERE process = 'run'") == 0)
        }
    }

}
