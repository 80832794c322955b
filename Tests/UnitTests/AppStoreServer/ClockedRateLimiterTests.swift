import Synchronization
import TestSupport
import Testing

@testable import AppStoreServer

/// The rate limiter's turns and `Retry-After` closures on a manual clock: time moves only when
/// the test moves it, so what is checked is the limiter's own arithmetic, however busy the
/// machine is. (A limiter that ignored its clock would wait on real time and grant at the
/// manual clock's start, or refuse where it should wait.)
@Suite(.timeLimit(.minutes(1))) struct ClockedRateLimiterTests {
    /// Calls `waitForTurn` from `callers` tasks at once and moves the clock from one deadline to
    /// the next, each time after every caller is granted or asleep on it; returns the clock's
    /// time of each grant, in order.
    static func grants(
        of endpoint: AppStoreServerAPIEndpoint, callers: Int, limiter: RateLimiter, clock: ManualClock
    ) async throws -> [Duration] {
        let grants = Grants()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<callers {
                group.addTask {
                    try await limiter.waitForTurn(endpoint)
                    grants.record(clock.now)
                }
            }
            while true {
                // Settled: each caller granted or asleep (a woken one may sleep again instead).
                while grants.times.count + clock.sleepers < callers { await Task.yield() }
                guard let next = clock.nextDeadline else { break }
                clock.advance(to: next)
            }
            try await group.waitForAll()
        }
        return grants.times.sorted()
    }

    /// A burst of 25 callers at 10 requests per second is granted one every 100 ms of the
    /// clock, the first at once: no one-second window holds more than 10 grants.
    @Test func aBurstIsGrantedEvenlyAndNeverAboveTheRate() async throws {
        let clock = ManualClock()
        let limiter = RateLimiter(configuration: .init(requestsPerSecond: [.getTransactionHistory: 10], clock: clock))
        let grants = try await Self.grants(of: .getTransactionHistory, callers: 25, limiter: limiter, clock: clock)
        #expect(grants == (0..<25).map { .milliseconds(100 * $0) })
        for (index, grant) in grants.enumerated() where index >= 10 {
            #expect(grant - grants[index - 10] >= .seconds(1), "11 grants within one second, the last at \(grant)")
        }
    }

    /// The second's cap holds where the even spacing alone would not: at 2.5 requests per
    /// second (a turn every 400 ms), no second holds more than 2 grants.
    @Test func aFractionalRateKeepsToItsWholeRequestsPerSecond() async throws {
        let clock = ManualClock()
        let limiter = RateLimiter(configuration: .init(requestsPerSecond: [.getNotificationHistory: 2.5], clock: clock))
        let grants = try await Self.grants(of: .getNotificationHistory, callers: 7, limiter: limiter, clock: clock)
        #expect(grants.count == 7)
        for (index, grant) in grants.enumerated() where index >= 2 {
            #expect(grant - grants[index - 2] >= .seconds(1), "3 grants within one second, the last at \(grant)")
        }
        for (earlier, later) in zip(grants, grants.dropFirst()) {
            #expect(later - earlier >= .milliseconds(400))
        }
    }

    /// A closed endpoint grants its next turn exactly when the closure ends by the clock: not a
    /// nanosecond before.
    @Test func aClosedEndpointReopensExactlyAtItsDeadline() async throws {
        let clock = ManualClock()
        clock.advance(by: .seconds(100))
        let limiter = RateLimiter(configuration: .init(requestsPerSecond: [.getTransactionHistory: 10], clock: clock))
        await limiter.close(.getTransactionHistory, for: .seconds(5))
        let granted = Grants()
        let waiter = Task {
            try await limiter.waitForTurn(.getTransactionHistory)
            granted.record(clock.now)
        }
        await clock.waitForSleepers(1)
        #expect(clock.deadlines == [.seconds(105)])
        clock.advance(by: .seconds(5) - .nanoseconds(1))
        #expect(clock.sleepers == 1, "woken before the closure ended")
        clock.advance(by: .nanoseconds(1))
        try await waiter.value
        #expect(granted.times == [.seconds(105)])
    }

    /// A caller that will not wait as long as the closure still lasts (by the clock) is refused
    /// at once; one that will, waits. The closure's remainder shrinks as the clock moves.
    @Test func aCallerIsRefusedOnlyWhileTheClosureOutlastsItsPatience() async throws {
        let clock = ManualClock()
        let limiter = RateLimiter(configuration: .init(requestsPerSecond: [:], clock: clock))
        await limiter.close(.lookUpOrderId, for: .seconds(5))
        await #expect(throws: RateLimiter.EndpointClosed.self) {
            try await limiter.waitForTurn(.lookUpOrderId, longestClosure: .seconds(5) - .nanoseconds(1))
        }
        clock.advance(by: .seconds(1))
        await #expect(throws: RateLimiter.EndpointClosed.self) {
            try await limiter.waitForTurn(.lookUpOrderId, longestClosure: .seconds(4) - .nanoseconds(1))
        }
        let waiter = Task { try await limiter.waitForTurn(.lookUpOrderId, longestClosure: .seconds(4)) }
        await clock.waitForSleepers(1)
        #expect(clock.deadlines == [.seconds(5)])
        clock.advance(by: .seconds(4))
        try await waiter.value
    }

    /// A closure ends for callers already waiting for their turn: they wait it out, then keep
    /// to the rate (the first at the deadline, the next a turn later).
    @Test func callersWaitingWhenAnEndpointClosesWaitItOutThenKeepToTheRate() async throws {
        let clock = ManualClock()
        let limiter = RateLimiter(configuration: .init(requestsPerSecond: [.getTransactionHistory: 10], clock: clock))
        try await limiter.waitForTurn(.getTransactionHistory)
        await limiter.close(.getTransactionHistory, for: .seconds(3))
        let grants = try await Self.grants(of: .getTransactionHistory, callers: 3, limiter: limiter, clock: clock)
        #expect(grants == [.seconds(3), .milliseconds(3100), .milliseconds(3200)])
    }
}

/// The clock's time of each turn granted, as the granted callers record it.
/// The observer that shares a 429's closure with the app's other processes has been told by the
/// time `close` returns: a process that ends on that 429 (a `Retry-After` beyond its cap, exit 2)
/// must not end before the closure is written, or the next process calls Apple inside Apple's hour.
@Suite struct RateLimiterObserverTests {
    @Test func closeReturnsOnlyOnceTheObserverWasTold() async throws {
        let clock = ManualClock()
        let limiter = RateLimiter(configuration: .init(requestsPerSecond: [.getNotificationHistory: 10], clock: clock))
        let observer = SlowObserver()
        await limiter.observe(with: observer)
        await limiter.close(.getNotificationHistory, for: .seconds(3600))
        #expect(observer.told == [AppStoreServerAPIEndpoint.getNotificationHistory.name])
    }
}

/// Records each closure it is told of, after giving way many times (as a database write would).
private final class SlowObserver: RateLimiter.Observer {
    private let recorded = Mutex<[String]>([])

    func endpointClosed(_ endpoint: AppStoreServerAPIEndpoint, untilUNIXMilliseconds: Int64) async {
        for _ in 0..<100 { await Task.yield() }
        recorded.withLock { $0.append(endpoint.name) }
    }

    var told: [String] { recorded.withLock { $0 } }
}

private final class Grants: Sendable {
    private let recorded = Mutex<[Duration]>([])

    func record(_ time: Duration) { recorded.withLock { $0.append(time) } }

    var times: [Duration] { recorded.withLock { $0 } }
}
