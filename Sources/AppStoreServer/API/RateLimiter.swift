import Foundation

/// A request budget per endpoint, shared by every request of the process.
///
/// Requests of one endpoint are spaced evenly at the configured rate, and a grant is also
/// refused while the last second already holds as many grants as the budget (a late-waking task
/// cannot bunch up with punctual ones). So a burst of concurrency turns into waiting rather than
/// into 429s, and no one-second window ever holds more than the budget. After a 429 the endpoint
/// is closed until the `Retry-After` instant for every caller; a caller that will not wait that
/// long (``waitForTurn(_:longestClosure:)``) is refused at once. A process sharing its app's budget
/// with others spends the share they give it (``setShare(_:)``), and nothing on an endpoint the
/// share pauses: callers wait until it resumes.
///
/// ```swift
/// let limiter = RateLimiter(requestsPerSecond: [.getNotificationHistory: 40])
/// try await limiter.waitForTurn(.getNotificationHistory)
/// ```
///
/// Turns and closures are judged by the configured clock (a test's manual one);
/// `Retry-After` instants from other processes are wall-clock times, turned into waits on it.
public actor RateLimiter {
    public struct Configuration: Sendable {
        /// The budget of each endpoint; endpoints not listed are not limited.
        public var requestsPerSecond: [AppStoreServerAPIEndpoint: Double]
        /// The time turns and closures are judged by.
        public var clock: any MonotonicClock

        public init(requestsPerSecond: [AppStoreServerAPIEndpoint: Double], clock: any MonotonicClock = .system) {
            self.requestsPerSecond = requestsPerSecond
            self.clock = clock
        }
    }

    /// Told when a 429 closes an endpoint, so that other processes sharing the app's budget close
    /// it too (see ``closeFromElsewhere(_:untilUNIXMilliseconds:)``).
    public protocol Observer: Sendable {
        func endpointClosed(_ endpoint: AppStoreServerAPIEndpoint, untilUNIXMilliseconds: Int64) async
    }

    private struct Budget {
        var rate: Double
        var interval: Duration
        var perSecond: Int
        var nextSlot: Duration?
        /// Grant instants within the last second, oldest first.
        var recentGrants: [Duration] = []
    }

    /// A process's part of a budget it shares with other processes (``setShare(_:)``).
    public struct Share: Sendable, Equatable {
        /// The rate of each endpoint listed, requests per second; endpoints not listed keep theirs.
        public var requestsPerSecond: [AppStoreServerAPIEndpoint: Double]
        /// The endpoints that grant no turn (callers wait, however long) until a later share no
        /// longer lists them.
        public var paused: Set<AppStoreServerAPIEndpoint>

        public init(requestsPerSecond: [AppStoreServerAPIEndpoint: Double], paused: Set<AppStoreServerAPIEndpoint> = []) {
            self.requestsPerSecond = requestsPerSecond
            self.paused = paused
        }
    }

    private var budgets: [AppStoreServerAPIEndpoint: Budget] = [:]
    /// Until when (on ``clock``) each closed endpoint grants no turn.
    private var closedUntil: [AppStoreServerAPIEndpoint: Duration] = [:]
    private var paused: Set<AppStoreServerAPIEndpoint> = []
    /// Callers waiting while their endpoint is paused; all are woken when an endpoint resumes.
    private var pausedWaiters: [Int: CheckedContinuation<Void, Never>] = [:]
    private var nextWaiter = 0
    private var observer: (any Observer)?
    /// The time turns and closures are judged by.
    public nonisolated let clock: any MonotonicClock
    /// The budget of each limited endpoint, requests per second (for reports).
    public nonisolated let requestsPerSecond: [AppStoreServerAPIEndpoint: Double]

    public init(configuration: Configuration) {
        self.clock = configuration.clock
        self.requestsPerSecond = configuration.requestsPerSecond.filter { $0.value > 0 }
        for (endpoint, rate) in configuration.requestsPerSecond where rate > 0 {
            budgets[endpoint] = Budget(rate: rate, interval: .nanoseconds(Int64(1_000_000_000 / rate)), perSecond: max(Int(rate.rounded(.down)), 1))
        }
    }

    /// A limiter on the system clock.
    ///
    /// - Parameter requestsPerSecond: the budget of each endpoint; endpoints not listed are not limited.
    public init(requestsPerSecond: [AppStoreServerAPIEndpoint: Double]) {
        self.init(configuration: Configuration(requestsPerSecond: requestsPerSecond))
    }

    /// The default budget: `fraction` of Apple's documented limit, 10% of that in the sandbox.
    public static func defaultBudget(environment: AppStoreEnvironment, fraction: Double = 0.8) -> [AppStoreServerAPIEndpoint: Double] {
        let environmentShare = environment == .production ? 1.0 : 0.1
        var budget: [AppStoreServerAPIEndpoint: Double] = [:]
        for endpoint in AppStoreServerAPIEndpoint.all {
            budget[endpoint] = endpoint.appleProductionLimitPerSecond * environmentShare * fraction
        }
        return budget
    }

    /// Thrown by ``waitForTurn(_:longestClosure:)`` instead of waiting when the endpoint is closed
    /// for longer than the caller would wait.
    public struct EndpointClosed: Error, Sendable {
        public var endpoint: AppStoreServerAPIEndpoint
        /// When the endpoint reopens, UNIX milliseconds.
        public var reopensAt: Int64
    }

    /// Waits until this caller may send a request to `endpoint`.
    ///
    /// - Parameter longestClosure: while the endpoint is closed (after a 429) until further away
    ///   than this, throw ``EndpointClosed`` at once instead of waiting; `nil` waits however long.
    public func waitForTurn(_ endpoint: AppStoreServerAPIEndpoint, longestClosure: Duration? = nil) async throws {
        while true {
            try await waitWhilePaused(endpoint)
            let now = clock.now
            var earliest = now
            if let closed = closedUntil[endpoint], closed > earliest {
                if let longestClosure, closed - now > longestClosure {
                    throw EndpointClosed(endpoint: endpoint, reopensAt: unixMilliseconds(of: closed))
                }
                earliest = closed
            }
            if var budget = budgets[endpoint] {
                budget.recentGrants.removeAll { $0 <= now - .seconds(1) }
                if let slot = budget.nextSlot, slot > earliest { earliest = slot }
                if budget.recentGrants.count >= budget.perSecond, let oldest = budget.recentGrants.first {
                    earliest = max(earliest, oldest + .seconds(1))
                }
                if earliest <= now {
                    budget.recentGrants.append(now)
                    budget.nextSlot = now + budget.interval
                    budgets[endpoint] = budget
                    return
                }
                // Reserve the slot so concurrent callers queue behind it.
                budget.nextSlot = earliest + budget.interval
                budgets[endpoint] = budget
            } else if earliest <= now {
                return
            }
            try await clock.sleep(until: earliest)
            // Re-check: a 429 may have closed or a share paused the endpoint, or others took the second's grants.
            if let closed = closedUntil[endpoint], closed > clock.now { continue }
            if paused.contains(endpoint) { continue }
            if var budget = budgets[endpoint] {
                let woke = clock.now
                budget.recentGrants.removeAll { $0 <= woke - .seconds(1) }
                guard budget.recentGrants.count < budget.perSecond else {
                    budgets[endpoint] = budget
                    continue
                }
                budget.recentGrants.append(woke)
                budgets[endpoint] = budget
            }
            return
        }
    }

    /// Closes `endpoint` for every caller for `duration` from now (a 429's `Retry-After`), and
    /// tells the observer before it returns: a process that ends on this 429 (a `Retry-After`
    /// beyond its cap) has then shared the closure (a detached report could be lost with the process).
    public func close(_ endpoint: AppStoreServerAPIEndpoint, for duration: Duration) async {
        let instant = clock.now + duration
        if let current = closedUntil[endpoint], current >= instant { return }
        closedUntil[endpoint] = instant
        await observer?.endpointClosed(endpoint, untilUNIXMilliseconds: unixMilliseconds(of: instant))
    }

    /// Closes `endpoint` until a wall-clock instant another process learned from a 429.
    public func closeFromElsewhere(_ endpoint: AppStoreServerAPIEndpoint, untilUNIXMilliseconds milliseconds: Int64) {
        let wait = Duration.milliseconds(max(0, milliseconds - RetryAfter.milliseconds(of: Date())))
        guard wait > .zero else { return }
        let instant = clock.now + wait
        if let current = closedUntil[endpoint], current >= instant { return }
        closedUntil[endpoint] = instant
    }

    /// Reports this limiter's 429s to `observer` from now on.
    public func observe(with observer: any Observer) {
        self.observer = observer
    }

    /// The budget an endpoint is spent at now, requests per second (0 while it is paused).
    public func requestsPerSecond(of endpoint: AppStoreServerAPIEndpoint) -> Double? {
        paused.contains(endpoint) ? 0 : budgets[endpoint]?.rate
    }

    /// Whether `endpoint` grants no turn now (see ``setShare(_:)``).
    public func isPaused(_ endpoint: AppStoreServerAPIEndpoint) -> Bool {
        paused.contains(endpoint)
    }

    /// Spends this process's share of a budget shared with other processes from now on: the rates
    /// it gives, and the endpoints it pauses (all others resume). `share` is read when this call
    /// runs on the limiter, so of two calls that overtake each other the newer state wins.
    public func setShare(_ share: @Sendable () -> Share) {
        let share = share()
        setRequestsPerSecond(share.requestsPerSecond)
        let resumed = !paused.subtracting(share.paused).isEmpty
        paused = share.paused
        guard resumed else { return }
        let waiters = pausedWaiters.values
        pausedWaiters.removeAll()
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once `endpoint` is not paused; throws `CancellationError` when cancelled first.
    private func waitWhilePaused(_ endpoint: AppStoreServerAPIEndpoint) async throws {
        while paused.contains(endpoint) {
            try Task.checkCancellation()
            let id = nextWaiter
            nextWaiter += 1
            await withTaskCancellationHandler {
                await withCheckedContinuation { continuation in
                    if Task.isCancelled { continuation.resume() } else { pausedWaiters[id] = continuation }
                }
            } onCancel: {
                Task { await self.wakePausedWaiter(id) }
            }
        }
    }

    /// Callers waiting now for a paused endpoint to resume (for tests).
    var waitingWhilePaused: Int { pausedWaiters.count }

    private func wakePausedWaiter(_ id: Int) {
        pausedWaiters.removeValue(forKey: id)?.resume()
    }

    /// Changes the budget of endpoints (this process's share of a budget shared with others).
    public func setRequestsPerSecond(_ rates: [AppStoreServerAPIEndpoint: Double]) {
        for (endpoint, rate) in rates where rate > 0 {
            let interval = Duration.nanoseconds(Int64(1_000_000_000 / rate))
            let perSecond = max(Int(rate.rounded(.down)), 1)
            if var budget = budgets[endpoint] {
                (budget.rate, budget.interval, budget.perSecond) = (rate, interval, perSecond)
                budgets[endpoint] = budget
            } else {
                budgets[endpoint] = Budget(rate: rate, interval: interval, perSecond: perSecond)
            }
        }
    }

    /// The wall-clock time of an instant of this limiter's clock, UNIX milliseconds.
    private nonisolated func unixMilliseconds(of instant: Duration) -> Int64 {
        RetryAfter.milliseconds(of: Date(), plus: instant - clock.now)
    }
}
