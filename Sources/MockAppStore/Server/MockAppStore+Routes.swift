import AppStoreServer
import Foundation
import NIOCore
import NIOFoundationCompat
import NIOHTTP1

/// Request dispatch: latency, dropped connections, authentication, the rate limit and injected
/// faults apply to the App Store API endpoints, in that order; `/mock/...` is never sabotaged.
extension MockAppStore {
    enum Endpoint: String {
        case notificationHistory = "Get Notification History"
        case transactionHistory = "Get Transaction History"
        case subscriptionStatuses = "Get All Subscription Statuses"
        case lookUpOrderId = "Look Up Order ID"
        case requestTestNotification = "Request a Test Notification"
        case testNotificationStatus = "Get Test Notification Status"
    }

    func endpoint(for request: MockHTTPRequest) -> (Endpoint, String?)? {
        let path = request.path
        switch (request.method, path) {
        case (.POST, "/inApps/v1/notifications/history"): return (.notificationHistory, nil)
        case (.POST, "/inApps/v1/notifications/test"): return (.requestTestNotification, nil)
        default: break
        }
        let prefixes: [(HTTPMethod, String, Endpoint)] = [
            (.GET, "/inApps/v2/history/", .transactionHistory),
            (.GET, "/inApps/v1/subscriptions/", .subscriptionStatuses),
            (.GET, "/inApps/v1/lookup/", .lookUpOrderId),
            (.GET, "/inApps/v1/notifications/test/", .testNotificationStatus),
        ]
        for (method, prefix, endpoint) in prefixes where request.method == method && path.hasPrefix(prefix) {
            let parameter = String(path.dropFirst(prefix.count)).removingPercentEncoding ?? ""
            return (endpoint, parameter)
        }
        return nil
    }

    func respond(_ request: MockHTTPRequest) async -> MockHTTPResponse {
        if request.path.hasPrefix("/mock/") { return admin(request) }
        guard let (endpoint, parameter) = endpoint(for: request) else {
            return .text(.notFound, "Not Found")
        }
        let response = await respondToAPI(request, endpoint: endpoint, parameter: parameter)
        statistics.update { $0.responses[String(response.status.code), default: 0] += 1 }
        return response
    }

    private func respondToAPI(_ request: MockHTTPRequest, endpoint: Endpoint, parameter: String?) async -> MockHTTPResponse {
        let account = account(namedBy: request, endpoint: endpoint, parameter: parameter)
        let historyFilter = endpoint == .notificationHistory ? Self.historyFilter(of: request) : nil
        statistics.update {
            $0.requests[endpoint.rawValue, default: 0] += 1
            $0.requestsByAccount[account, default: 0] += 1
            if let historyFilter { $0.historyRequestsByFilter[historyFilter, default: 0] += 1 }
        }
        let faults = self.faults.withLock { $0 }
        let latency = faults.latencyMilliseconds + (faults.latencyJitterMilliseconds > 0 ? Int.random(in: 0...faults.latencyJitterMilliseconds) : 0)
        if latency > 0 { try? await Task.sleep(for: .milliseconds(latency)) }
        if roll(faults.dropRate, "drop") {
            statistics.update { $0.droppedConnections += 1 }
            return MockHTTPResponse(status: .ok, delivery: .drop)
        }
        let authorization = request.headers.first(name: "Authorization")
        if let problem = authenticator.check(authorization: authorization) {
            statistics.update { $0.unauthorized += 1 }
            logger.debug("unauthenticated", metadata: ["reason": "\(problem)"])
            return .text(.unauthorized, "Unauthenticated\n\nRequest ID: \(UUID().uuidString.prefix(26)).0.0\n")
        }
        if let authorization { statistics.sawToken(String(authorization.dropFirst("Bearer ".count))) }

        let decision = rateLimiter.decide(endpoint: endpoint.rawValue, limit: limit(for: endpoint), at: request.arrivedAt)
        statistics.update {
            if decision.violatedRetryAfter { $0.retryAfterViolations += 1 }
            $0.maxRequestsInOneSecond[endpoint.rawValue] = max($0.maxRequestsInOneSecond[endpoint.rawValue] ?? 0, decision.requestsInWindow)
        }
        if !decision.allowed {
            statistics.update { $0.rateLimited += 1 }
            return rateLimited(endpoint, until: decision.retryAfter, request: request, format: faults.retryAfterFormat)
        }
        if roll(faults.rateLimitedRate, "429") {
            let ahead = faults.rateLimitedRetryAfterSeconds > 0 ? Int64(faults.rateLimitedRetryAfterSeconds) * 1000 : Int64.random(in: 200...1000)
            statistics.update {
                $0.rateLimited += 1
                $0.injectedRateLimits += 1
            }
            return rateLimited(endpoint, until: Self.nowMilliseconds + ahead, request: request, format: faults.retryAfterFormat)
        }
        if roll(faults.serverErrorRate, "5xx") {
            statistics.update { $0.injectedServerErrors += 1 }
            return Self.apiError(.internalServerError, 5_000_001, "An unknown error occurred. Please try again.")
        }
        var response: MockHTTPResponse
        switch endpoint {
        case .notificationHistory: response = notificationHistory(request, faults: faults)
        case .transactionHistory: response = transactionHistory(request, anyTransactionId: parameter ?? "")
        case .subscriptionStatuses: response = subscriptionStatuses(request, anyTransactionId: parameter ?? "")
        case .lookUpOrderId: response = lookUpOrderId(parameter ?? "")
        case .requestTestNotification: response = await requestTestNotification()
        case .testNotificationStatus: response = testNotificationStatus(token: parameter ?? "")
        }
        if response.status == .ok, roll(faults.truncateRate, "truncate") {
            statistics.update { $0.truncatedBodies += 1 }
            response.delivery = .truncate
        }
        return response
    }

    /// The customer a request names, for ``MockStatistics/Counts/requestsByAccount``.
    func account(namedBy request: MockHTTPRequest, endpoint: Endpoint, parameter: String?) -> String {
        let snapshot = catalog.snapshot
        let transactionId: String?
        switch endpoint {
        case .transactionHistory, .subscriptionStatuses: transactionId = parameter
        case .lookUpOrderId: transactionId = parameter.flatMap { snapshot.world.orders[$0]?.first }
        case .notificationHistory:
            let body = try? JSONDecoder().decode([String: RawJSON].self, from: Data(buffer: request.body))
            guard let filter = body?["transactionId"]?.string else { return "*" }
            transactionId = filter
        case .requestTestNotification, .testNotificationStatus: return "*"
        }
        return transactionId.flatMap { snapshot.account(ofTransaction: $0) } ?? "?"
    }

    /// The filter a Get Notification History body carries, for ``MockStatistics/Counts/historyRequestsByFilter``.
    static func historyFilter(of request: MockHTTPRequest) -> String {
        guard let body = try? JSONDecoder().decode([String: RawJSON].self, from: Data(buffer: request.body)) else { return "?" }
        if body["transactionId"]?.string != nil { return "transactionId" }
        guard let type = body["notificationType"]?.string else { return "*" }
        return body["notificationSubtype"]?.string.map { "\(type)/\($0)" } ?? type
    }

    func limit(for endpoint: Endpoint) -> Double {
        let share = configuration.scenario.environment == .production ? 1.0 : 0.1
        switch endpoint {
        case .requestTestNotification, .testNotificationStatus: return 1 * share
        case .lookUpOrderId: return min(configuration.rateLimitPerSecond ?? .infinity, 10 * share)
        default: return configuration.rateLimitPerSecond ?? 50 * share
        }
    }

    /// 429 with a `Retry-After` for `instant` (UNIX ms) in `format`; the rate limiter records the
    /// instant the header announces (whole-second forms round up) to count requests that come before it.
    func rateLimited(
        _ endpoint: Endpoint, until instant: Int64, request: MockHTTPRequest,
        format: FaultConfiguration.RetryAfterFormat
    ) -> MockHTTPResponse {
        let retryAfter = format.header(for: instant, now: Self.nowMilliseconds)
        rateLimiter.announce(endpoint: endpoint.rawValue, retryAfter: retryAfter.announced, at: request.arrivedAt)
        return Self.apiError(.tooManyRequests, 4_290_000, "Rate limit exceeded.", headers: ["Retry-After": retryAfter.value])
    }

    /// Whether to inject the fault `kind` into this request, at `rate` of the eligible requests.
    func roll(_ rate: Double, _ kind: String) -> Bool {
        guard rate > 0 else { return false }
        return faultDebt.withLock { debt in
            // The first eligible request gets the fault, then every 1/rate-th one.
            debt[kind, default: 1 - rate] += rate
            guard debt[kind, default: 0] >= 1 else { return false }
            debt[kind, default: 0] -= 1
            return true
        }
    }

    /// Apple's error body: `{"errorCode": ..., "errorMessage": ...}`.
    static func apiError(_ status: HTTPResponseStatus, _ code: Int64, _ message: String, headers: HTTPHeaders = [:]) -> MockHTTPResponse {
        .json(status, ErrorPayload(errorCode: code, errorMessage: message), headers: headers)
    }

    static var nowMilliseconds: Int64 { Int64(Date().timeIntervalSince1970 * 1000) }
}
