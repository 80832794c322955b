import Synchronization

/// What the mock saw, served by `GET /mock/stats` so tests can check a client's behaviour from
/// the server's side: requests per endpoint, the busiest second, 429s, and requests that came
/// before an announced `Retry-After`.
final class MockStatistics: Sendable {
    struct Counts: Codable, Sendable {
        var requests: [String: Int] = [:]
        var responses: [String: Int] = [:]
        var rateLimited = 0
        var retryAfterViolations = 0
        var maxRequestsInOneSecond: [String: Int] = [:]
        var unauthorized = 0
        var distinctTokens = 0
        var droppedConnections = 0
        var truncatedBodies = 0
        var injectedServerErrors = 0
        var injectedRateLimits = 0
        var expiredTokens = 0
        var deliveryAttempts = 0
        var deliverySuccesses = 0
        var deliveryFailures = 0
        var liveDeliveryComplete = false
    }

    private let counts = Mutex(Counts())
    private let tokens = Mutex(Set<String>())

    func update(_ body: (inout Counts) -> Void) { counts.withLock { body(&$0) } }

    func sawToken(_ token: String) {
        let count = tokens.withLock { tokens in
            tokens.insert(token)
            return tokens.count
        }
        counts.withLock { $0.distinctTokens = count }
    }

    var snapshot: Counts { counts.withLock { $0 } }

    func reset() {
        tokens.withLock { $0.removeAll() }
        counts.withLock { counts in
            let complete = counts.liveDeliveryComplete
            counts = Counts()
            counts.liveDeliveryComplete = complete
        }
    }
}
