import Foundation

/// A request budget per endpoint, shared by every request of the process.
///
/// Requests of one endpoint are spaced evenly at the configured rate, so a burst of concurrency
/// turns into waiting rather than into 429s, and no one-second window ever holds more than the
/// budget. After a 429 the endpoint is closed until the `Retry-After` instant for every caller.
///
/// ```swift
/// let limiter = RateLimiter(requestsPerSecond: [.getNotificationHistory: 40])
/// try await limiter.waitForTurn(.getNotificationHistory)
/// ```
public actor RateLimiter {
    private var interval: [AppStoreServerAPIEndpoint: Duration] = [:]
    private var nextSlot: [AppStoreServerAPIEndpoint: ContinuousClock.Instant] = [:]
    private var closedUntil: [AppStoreServerAPIEndpoint: ContinuousClock.Instant] = [:]
    private let clock = ContinuousClock()

    /// - Parameter requestsPerSecond: the budget of each endpoint; endpoints not listed are not limited.
    public init(requestsPerSecond: [AppStoreServerAPIEndpoint: Double]) {
        for (endpoint, rate) in requestsPerSecond where rate > 0 {
            interval[endpoint] = .nanoseconds(Int64(1_000_000_000 / rate))
        }
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

    /// Waits until this caller may send a request to `endpoint`.
    public func waitForTurn(_ endpoint: AppStoreServerAPIEndpoint) async throws {
        while true {
            let now = clock.now
            var slot = max(now, nextSlot[endpoint] ?? now)
            if let closed = closedUntil[endpoint], closed > slot { slot = closed }
            if let step = interval[endpoint] { nextSlot[endpoint] = slot + step }
            if slot > now {
                try await clock.sleep(until: slot)
            }
            // A 429 may have closed the endpoint while this caller slept.
            if let closed = closedUntil[endpoint], closed > clock.now { continue }
            return
        }
    }

    /// Closes `endpoint` for every caller until `instant` (from a 429's `Retry-After`).
    public func close(_ endpoint: AppStoreServerAPIEndpoint, until instant: ContinuousClock.Instant) {
        if let current = closedUntil[endpoint], current >= instant { return }
        closedUntil[endpoint] = instant
    }

    /// Converts Apple's `Retry-After` (UNIX milliseconds) into this clock, plus a safety margin.
    nonisolated func instant(forUNIXMilliseconds milliseconds: Int64, margin: Duration) -> ContinuousClock.Instant {
        let nowMilliseconds = Int64(Date().timeIntervalSince1970 * 1000)
        let wait = Duration.milliseconds(max(0, milliseconds - nowMilliseconds))
        return ContinuousClock().now + wait + margin
    }
}
