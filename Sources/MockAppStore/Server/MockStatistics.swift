import Synchronization

/// What the mock saw, served by `GET /mock/stats` so tests can check a client's behaviour from
/// the server's side: requests per endpoint, the busiest second, 429s, and requests that came
/// before an announced `Retry-After`; in total and per app and environment (``Counts/apps``).
package final class MockStatistics: Sendable {
    package struct Counts: Codable, Sendable {
        package var requests: [String: Int] = [:]
        package var responses: [String: Int] = [:]
        package var rateLimited = 0
        /// Requests that arrived before the `Retry-After` instant announced to their endpoint (read
        /// as the client reads the form sent), later than the in-flight allowance after it.
        package var retryAfterViolations = 0
        package var maxRequestsInOneSecond: [String: Int] = [:]
        package var unauthorized = 0
        package var distinctTokens = 0
        package var droppedConnections = 0
        package var truncatedBodies = 0
        package var injectedServerErrors = 0
        package var injectedRateLimits = 0
        package var expiredTokens = 0
        /// Look Up Order ID requests for an order ID the app does not know (answered with status 1).
        package var unknownOrderIds = 0
        /// API requests by the customer (`account-N`) they name: the path's transaction ID, the
        /// order ID, or Get Notification History's `transactionId` filter; `*` for requests that
        /// name none (an unfiltered history query, test notifications), `?` for an ID no account has.
        package var requestsByAccount: [String: Int] = [:]
        /// Get Notification History requests by the filter they carry, counted as `requests` is:
        /// `TYPE` or `TYPE/SUBTYPE`, `*` for none (an unfiltered sweep), `transactionId` for one
        /// customer's, `?` for a body that is not JSON.
        package var historyRequestsByFilter: [String: Int] = [:]
        package var deliveryAttempts = 0
        package var deliverySuccesses = 0
        package var deliveryFailures = 0
        package var liveDeliveryComplete = false
        /// Requests whose transaction or order ID belongs to another app than the one their JWT's
        /// `bid` names (answered as Apple does: 4040010, or status 1 for an order ID). A reconciler
        /// that keeps apps apart makes none. Only an ID the asking app lacks is seen: with
        /// `--shared-transaction-ids` most such requests find the asking app's own purchase.
        package var crossAppRequests = 0
        /// The mock's own time answering App Store Server API requests, in microseconds: from the
        /// request's routing to its answer (signing included), the injected latency left out. A
        /// benchmark takes it from a client's time to tell the client's cost from Apple's part.
        package var answeringMicroseconds = 0
        /// The same counts for each app and environment the mock simulates (`BUNDLE_ID/Production`,
        /// `BUNDLE_ID/Sandbox`, see ``AppKey``), and for one it serves without purchases once a
        /// request reaches it: the requests whose JWT named the app, sent to that
        /// environment's base URL, and the deliveries of its notifications. The busiest second is
        /// per app there, and in the total the busiest of any app (each app has its own limiter);
        /// requests that name no app (no valid JWT) count in the total only. Absent inside an entry.
        package var apps: [String: Counts]?
    }

    private struct State {
        var total = Counts()
        var apps: [String: Counts] = [:]
        /// The distinct tokens behind ``Counts/distinctTokens``: of any app, and of each.
        var tokens = Set<String>()
        var tokensByApp: [String: Set<String>] = [:]
    }

    private let state: Mutex<State>

    /// - Parameter apps: the apps listed in ``Counts/apps`` from the start.
    init(apps: [AppKey] = []) {
        var state = State()
        for app in apps { state.apps[app.description] = Counts() }
        self.state = Mutex(state)
    }

    /// Applies `body` to the total, and to `app`'s counts when the event is an app's.
    func update(_ app: AppKey? = nil, _ body: (inout Counts) -> Void) {
        state.withLock { state in
            body(&state.total)
            if let app { body(&state.apps[app.description, default: Counts()]) }
        }
    }

    /// Live delivery is over (or there was none, in scale mode): in the total and for every app.
    func liveDeliveryCompleted() {
        state.withLock { state in
            state.total.liveDeliveryComplete = true
            for app in state.apps.keys { state.apps[app]?.liveDeliveryComplete = true }
        }
    }

    /// Counts an authenticated request's token, in the total and for its app.
    func sawToken(_ token: String, app: AppKey) {
        state.withLock { state in
            state.tokens.insert(token)
            state.total.distinctTokens = state.tokens.count
            state.tokensByApp[app.description, default: []].insert(token)
            state.apps[app.description, default: Counts()].distinctTokens = state.tokensByApp[app.description]?.count ?? 0
        }
    }

    var snapshot: Counts {
        state.withLock { state in
            var counts = state.total
            counts.apps = state.apps
            return counts
        }
    }

    func reset() {
        state.withLock { state in
            func cleared(_ old: Counts) -> Counts {
                var fresh = Counts()
                fresh.liveDeliveryComplete = old.liveDeliveryComplete
                return fresh
            }
            state.total = cleared(state.total)
            state.apps = state.apps.mapValues(cleared)
            state.tokens = []
            state.tokensByApp = [:]
        }
    }
}
