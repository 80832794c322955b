import Synchronization

/// What the mock saw, served by `GET /mock/stats` so tests can check a client's behaviour from
/// the server's side: requests per endpoint, the busiest second, 429s, and requests that came
/// before an announced `Retry-After`.
public final class MockStatistics: Sendable {
    public struct Counts: Codable, Sendable {
        public var requests: [String: Int] = [:]
        public var responses: [String: Int] = [:]
        public var rateLimited = 0
        /// Requests that arrived before the `Retry-After` instant announced to their endpoint (read
        /// as the client reads the form sent), later than the in-flight allowance after it.
        public var retryAfterViolations = 0
        public var maxRequestsInOneSecond: [String: Int] = [:]
        public var unauthorized = 0
        public var distinctTokens = 0
        public var droppedConnections = 0
        public var truncatedBodies = 0
        public var injectedServerErrors = 0
        public var injectedRateLimits = 0
        public var expiredTokens = 0
        /// Look Up Order ID requests for an order ID the app does not know (answered with status 1).
        public var unknownOrderIds = 0
        /// API requests by the customer (`account-N`) they name: the path's transaction ID, the
        /// order ID, or Get Notification History's `transactionId` filter; `*` for requests that
        /// name none (an unfiltered history query, test notifications), `?` for an ID no account has.
        public var requestsByAccount: [String: Int] = [:]
        /// Get Notification History requests by the filter they carry, counted as `requests` is:
        /// `TYPE` or `TYPE/SUBTYPE`, `*` for none (an unfiltered sweep), `transactionId` for one
        /// customer's, `?` for a body that is not JSON.
        public var historyRequestsByFilter: [String: Int] = [:]
        public var deliveryAttempts = 0
        public var deliverySuccesses = 0
        public var deliveryFailures = 0
        public var liveDeliveryComplete = false
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
