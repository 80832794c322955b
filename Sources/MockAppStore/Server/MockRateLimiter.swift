import Synchronization

/// The mock's enforcement of a per-endpoint limit: at most `limit` requests in any sliding
/// second; beyond it, 429 until the oldest request leaves the window. It also keeps the latest
/// `Retry-After` instant announced per endpoint (``announce(endpoint:retryAfter:at:)``, in
/// whichever form it was sent) to tell requests that come before it.
final class MockRateLimiter: Sendable {
    struct Decision {
        var allowed: Bool
        /// When not allowed: the instant, UNIX ms, the window has room again (to announce).
        var retryAfter: Int64
        /// The request came before a `Retry-After` this endpoint announced earlier (after the
        /// announcement could have reached the client).
        var violatedRetryAfter: Bool
        var requestsInWindow: Int
    }

    private struct EndpointState {
        var accepted: [Int64] = []
        var announcedRetryAfter: Int64 = 0
        var announcedAt: Int64 = 0
    }

    /// Requests arriving this soon after a 429 was sent were in flight already (sent before the
    /// client could know); a loaded two-core machine can take that long to deliver them.
    static let inFlightAllowance: Int64 = 250

    private let state = Mutex<[String: EndpointState]>([:])

    func decide(endpoint: String, limit: Double, at now: Int64) -> Decision {
        state.withLock { states in
            var endpointState = states[endpoint] ?? EndpointState()
            let violated = now < endpointState.announcedRetryAfter && now >= endpointState.announcedAt + Self.inFlightAllowance
            endpointState.accepted.removeAll { $0 <= now - 1000 }
            defer { states[endpoint] = endpointState }
            guard limit > 0 else {
                endpointState.accepted.append(now)
                return Decision(allowed: true, retryAfter: 0, violatedRetryAfter: violated, requestsInWindow: endpointState.accepted.count)
            }
            if Double(endpointState.accepted.count) >= limit {
                let retryAfter = (endpointState.accepted.first ?? now) + 1000
                return Decision(
                    allowed: false, retryAfter: retryAfter, violatedRetryAfter: violated,
                    requestsInWindow: endpointState.accepted.count)
            }
            endpointState.accepted.append(now)
            return Decision(allowed: true, retryAfter: 0, violatedRetryAfter: violated, requestsInWindow: endpointState.accepted.count)
        }
    }

    /// Records the instant (UNIX ms) a 429's `Retry-After` announced, as the client reads it.
    func announce(endpoint: String, retryAfter: Int64, at now: Int64) {
        state.withLock { states in
            var endpointState = states[endpoint] ?? EndpointState()
            announce(&endpointState, retryAfter: retryAfter, at: now)
            states[endpoint] = endpointState
        }
    }

    private func announce(_ state: inout EndpointState, retryAfter: Int64, at now: Int64) {
        if retryAfter > state.announcedRetryAfter {
            state.announcedRetryAfter = retryAfter
            state.announcedAt = now
        }
    }
}
