import Synchronization

/// Counters of what the client did, for reports and metrics.
public final class APIStatistics: Sendable {
    public struct Snapshot: Sendable, Codable, Hashable {
        /// Requests sent, including retries.
        public var requests: Int
        /// Requests that were repeats of a failed one.
        public var retries: Int
        /// 429 responses received.
        public var rateLimited: Int
        /// 5xx responses received.
        public var serverErrors: Int
        /// Connection failures, timeouts and truncated bodies.
        public var transportErrors: Int
        /// Calls that failed for good.
        public var failedCalls: Int

        public init(requests: Int, retries: Int, rateLimited: Int, serverErrors: Int, transportErrors: Int, failedCalls: Int) {
            self.requests = requests
            self.retries = retries
            self.rateLimited = rateLimited
            self.serverErrors = serverErrors
            self.transportErrors = transportErrors
            self.failedCalls = failedCalls
        }

        /// The sum of two snapshots (for a run resumed by several processes).
        public static func + (lhs: Snapshot, rhs: Snapshot) -> Snapshot {
            Snapshot(requests: lhs.requests + rhs.requests, retries: lhs.retries + rhs.retries, rateLimited: lhs.rateLimited + rhs.rateLimited,
                     serverErrors: lhs.serverErrors + rhs.serverErrors, transportErrors: lhs.transportErrors + rhs.transportErrors,
                     failedCalls: lhs.failedCalls + rhs.failedCalls)
        }

        public static let zero = Snapshot(requests: 0, retries: 0, rateLimited: 0, serverErrors: 0, transportErrors: 0, failedCalls: 0)
    }

    private let requests = Atomic<Int>(0)
    private let retries = Atomic<Int>(0)
    private let rateLimited = Atomic<Int>(0)
    private let serverErrors = Atomic<Int>(0)
    private let transportErrors = Atomic<Int>(0)
    private let failedCalls = Atomic<Int>(0)

    public init() {}

    enum Event { case request, retry, rateLimited, serverError, transportError, failedCall }

    func record(_ event: Event) {
        switch event {
        case .request: requests.add(1, ordering: .relaxed)
        case .retry: retries.add(1, ordering: .relaxed)
        case .rateLimited: rateLimited.add(1, ordering: .relaxed)
        case .serverError: serverErrors.add(1, ordering: .relaxed)
        case .transportError: transportErrors.add(1, ordering: .relaxed)
        case .failedCall: failedCalls.add(1, ordering: .relaxed)
        }
    }

    public var snapshot: Snapshot {
        Snapshot(
            requests: requests.load(ordering: .relaxed), retries: retries.load(ordering: .relaxed),
            rateLimited: rateLimited.load(ordering: .relaxed), serverErrors: serverErrors.load(ordering: .relaxed),
            transportErrors: transportErrors.load(ordering: .relaxed), failedCalls: failedCalls.load(ordering: .relaxed))
    }
}
