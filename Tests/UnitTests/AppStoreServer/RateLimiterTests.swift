import Synchronization
import Testing

@testable import AppStoreServer

/// The limiter's pause, which a process's shared budget uses while the others do not count it.
@Suite(.timeLimit(.minutes(1))) struct RateLimiterTests {
    /// A paused endpoint grants no turn until a share resumes it; other endpoints keep granting.
    @Test func aPausedEndpointGrantsNoTurnUntilItResumes() async throws {
        let limiter = RateLimiter(requestsPerSecond: [.getTransactionHistory: 1000, .getNotificationHistory: 1000])
        await limiter.setShare { .init(requestsPerSecond: [:], paused: [.getTransactionHistory]) }
        #expect(await limiter.isPaused(.getTransactionHistory))
        #expect(await limiter.requestsPerSecond(of: .getTransactionHistory) == 0)
        let resumed = Atomic(false), granted = Atomic(false)
        let waiter = Task {
            try await limiter.waitForTurn(.getTransactionHistory, longestClosure: .zero)
            granted.store(true, ordering: .sequentiallyConsistent)
            return resumed.load(ordering: .sequentiallyConsistent)
        }
        // Until it waits (or, were the pause broken, was granted at once).
        while await limiter.waitingWhilePaused == 0, !granted.load(ordering: .sequentiallyConsistent) { await Task.yield() }
        try await limiter.waitForTurn(.getNotificationHistory, longestClosure: .zero)
        resumed.store(true, ordering: .sequentiallyConsistent)
        await limiter.setShare { .init(requestsPerSecond: [.getTransactionHistory: 500]) }
        #expect(try await waiter.value, "a turn was granted while the endpoint was paused")
        #expect(await limiter.requestsPerSecond(of: .getTransactionHistory) == 500)
        #expect(await limiter.waitingWhilePaused == 0)
    }

    /// A caller cancelled while its endpoint is paused stops waiting and leaves nothing behind.
    @Test func aCallerCancelledWhilePausedStopsWaiting() async throws {
        let limiter = RateLimiter(requestsPerSecond: [.getTransactionHistory: 1000])
        await limiter.setShare { .init(requestsPerSecond: [:], paused: [.getTransactionHistory]) }
        let granted = Atomic(false)
        let waiter = Task {
            try await limiter.waitForTurn(.getTransactionHistory)
            granted.store(true, ordering: .sequentiallyConsistent)
        }
        while await limiter.waitingWhilePaused == 0, !granted.load(ordering: .sequentiallyConsistent) { await Task.yield() }
        waiter.cancel()
        await #expect(throws: CancellationError.self) { try await waiter.value }
        #expect(await limiter.waitingWhilePaused == 0)
    }
}
