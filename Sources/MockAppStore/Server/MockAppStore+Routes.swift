import AppStoreServer
import Foundation
import Logging
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import Synchronization

/// Request dispatch: the JWT's `bid` and the base URL the request came to pick the app and
/// environment; latency, dropped connections, authentication, the app's rate limit and injected
/// faults apply to the App Store API endpoints, in that order; `/mock/...` is never sabotaged.
extension MockAppStore {
    enum Endpoint: String {
        case notificationHistory = "Get Notification History"
        case transactionHistory = "Get Transaction History"
        case subscriptionStatuses = "Get All Subscription Statuses"
        case lookUpOrderId = "Look Up Order ID"
        case requestTestNotification = "Request a Test Notification"
        case testNotificationStatus = "Get Test Notification Status"
        case sendConsumptionInformation = "Send Consumption Information"
        case setAppAccountToken = "Set App Account Token"
    }

    func endpoint(for request: MockHTTPRequest) -> (Endpoint, String?)? {
        let path = request.path
        switch (request.method, path) {
        case (.POST, "/inApps/v1/notifications/history"): return (.notificationHistory, nil)
        case (.POST, "/inApps/v1/notifications/test"): return (.requestTestNotification, nil)
        default: break
        }
        let tokenPath = (prefix: "/inApps/v1/transactions/", suffix: "/appAccountToken")
        if request.method == .PUT, path.hasPrefix(tokenPath.prefix), path.hasSuffix(tokenPath.suffix),
            path.count >= tokenPath.prefix.count + tokenPath.suffix.count
        {
            let parameter = String(path.dropFirst(tokenPath.prefix.count).dropLast(tokenPath.suffix.count))
            return (.setAppAccountToken, parameter.removingPercentEncoding ?? "")
        }
        let prefixes: [(HTTPMethod, String, Endpoint)] = [
            (.GET, "/inApps/v2/history/", .transactionHistory),
            (.GET, "/inApps/v1/subscriptions/", .subscriptionStatuses),
            (.GET, "/inApps/v1/lookup/", .lookUpOrderId),
            (.GET, "/inApps/v1/notifications/test/", .testNotificationStatus),
            (.PUT, "/inApps/v2/transactions/consumption/", .sendConsumptionInformation),
        ]
        for (method, prefix, endpoint) in prefixes where request.method == method && path.hasPrefix(prefix) {
            let parameter = String(path.dropFirst(prefix.count)).removingPercentEncoding ?? ""
            return (endpoint, parameter)
        }
        return nil
    }

    /// Answers a request that came to `environment`'s base URL.
    func respond(_ request: MockHTTPRequest, environment: AppStoreEnvironment) async -> MockHTTPResponse {
        if request.path == "/mock/app-store-connect" { return appStoreConnectControl(request) }
        if request.path.hasPrefix("/mock/") { return admin(request) }
        if request.path == "/v1/apps" || request.path.hasPrefix("/v1/apps/") { return appStoreConnect(request) }
        guard let (endpoint, parameter) = endpoint(for: request) else {
            return .text(.notFound, "Not Found")
        }
        let authentication = authenticator.check(authorization: request.headers.first(name: "Authorization"))
        // The JWT's `bid` and the base URL route the request to an app in an environment.
        let world = (try? authentication.get()).flatMap { worldsByKey[AppKey(bundleId: $0, environment: environment)] }
        var response = await respondToAPI(
            request, endpoint: endpoint, parameter: parameter, world: world, authentication: authentication, environment: environment)
        statistics.update(world?.key) { $0.responses[String(response.status.code), default: 0] += 1 }
        // As Apple's, every answer says the server's time (moved by `dateSkewSeconds`: a host's clock off).
        let skew = Int64(faults.withLock { $0.dateSkewSeconds })
        response.headers.replaceOrAdd(
            name: "Date", value: FaultConfiguration.RetryAfterFormat.imfFixdate(unixSeconds: Self.nowMilliseconds / 1000 + skew))
        return response
    }

    private func respondToAPI(
        _ request: MockHTTPRequest, endpoint: Endpoint, parameter: String?, world routed: AppWorld?,
        authentication: Result<String, RequestAuthenticator.Refusal>, environment: AppStoreEnvironment
    ) async -> MockHTTPResponse {
        let started = ContinuousClock.now
        var slept = Duration.zero
        defer {
            let answering = started.duration(to: .now) - slept
            statistics.update(routed?.key) { $0.answeringMicroseconds += Int(answering / .microseconds(1)) }
        }
        // A history request's body, read once for both counts (`nil`: not JSON).
        let historyBody =
            endpoint == .notificationHistory ? try? JSONDecoder().decode([String: RawJSON].self, from: Data(buffer: request.body)) : nil
        let account = routed.map { self.account(namedBy: endpoint, parameter: parameter, historyBody: historyBody, in: $0) }
        let historyFilter = endpoint == .notificationHistory ? Self.historyFilter(historyBody) : nil
        statistics.update(routed?.key) {
            $0.requests[endpoint.rawValue, default: 0] += 1
            if let account { $0.requestsByAccount[account, default: 0] += 1 }
            if let historyFilter { $0.historyRequestsByFilter[historyFilter, default: 0] += 1 }
        }
        let faults = self.faults.withLock { $0 }
        let latency = faults.latencyMilliseconds + (faults.latencyJitterMilliseconds > 0 ? Int.random(in: 0...faults.latencyJitterMilliseconds) : 0)
        if latency > 0 {
            let sleeping = ContinuousClock.now
            try? await Task.sleep(for: .milliseconds(latency))
            slept = sleeping.duration(to: .now)
        }
        if roll(faults.dropRate, "drop") {
            statistics.update(routed?.key) { $0.droppedConnections += 1 }
            return MockHTTPResponse(status: .ok, delivery: .drop)
        }
        let problem: String?
        switch authentication {
        case .failure(let refusal): problem = refusal.description
        case .success(let bundleId) where configuration.unauthorizedApps.contains(bundleId) || faults.refuses(bundleId, in: environment):
            problem = "the key does not cover \(bundleId)"
        case .success: problem = routed == nil ? "no such app in this environment" : nil
        }
        guard let world = routed, problem == nil else {
            statistics.update(routed?.key) { $0.unauthorized += 1 }
            logger.debug("unauthenticated", metadata: ["reason": "\(problem ?? "")"])
            return .text(.unauthorized, "Unauthenticated\n\nRequest ID: \(UUID().uuidString.prefix(26)).0.0\n")
        }
        if let authorization = request.headers.first(name: "Authorization") {
            statistics.sawToken(String(authorization.dropFirst("Bearer ".count)), app: world.key)
        }

        let decision = world.rateLimiter.decide(
            endpoint: endpoint.rawValue, limit: limit(for: endpoint, environment: world.scenario.environment), at: request.arrivedAt)
        statistics.update(world.key) {
            if decision.violatedRetryAfter { $0.retryAfterViolations += 1 }
            $0.maxRequestsInOneSecond[endpoint.rawValue] = max($0.maxRequestsInOneSecond[endpoint.rawValue] ?? 0, decision.requestsInWindow)
        }
        if !decision.allowed {
            statistics.update(world.key) { $0.rateLimited += 1 }
            return rateLimited(endpoint, until: decision.retryAfter, request: request, format: faults.retryAfterFormat, world: world)
        }
        if roll(faults.rateLimitedRate, "429") {
            let ahead = faults.rateLimitedRetryAfterSeconds > 0 ? Int64(faults.rateLimitedRetryAfterSeconds) * 1000 : Int64.random(in: 200...1000)
            statistics.update(world.key) {
                $0.rateLimited += 1
                $0.injectedRateLimits += 1
            }
            return rateLimited(endpoint, until: Self.nowMilliseconds + ahead, request: request, format: faults.retryAfterFormat, world: world)
        }
        if roll(faults.serverErrorRate, "5xx") {
            statistics.update(world.key) { $0.injectedServerErrors += 1 }
            return Self.apiError(.internalServerError, 5_000_001, "An unknown error occurred. Please try again.")
        }
        var response: MockHTTPResponse
        switch endpoint {
        case .notificationHistory: response = notificationHistory(request, in: world, faults: faults)
        case .transactionHistory: response = transactionHistory(request, anyTransactionId: parameter ?? "", in: world)
        case .subscriptionStatuses: response = subscriptionStatuses(request, anyTransactionId: parameter ?? "", in: world)
        case .lookUpOrderId: response = lookUpOrderId(parameter ?? "", in: world)
        case .requestTestNotification: response = await requestTestNotification(in: world)
        case .testNotificationStatus: response = testNotificationStatus(token: parameter ?? "", in: world)
        case .sendConsumptionInformation: response = sendConsumptionInformation(request, transactionId: parameter ?? "", in: world)
        case .setAppAccountToken: response = setAppAccountToken(request, originalTransactionId: parameter ?? "", in: world)
        }
        if response.status == .ok, roll(faults.truncateRate, "truncate") {
            statistics.update(world.key) { $0.truncatedBodies += 1 }
            response.delivery = .truncate
        }
        return response
    }

    /// The customer a request names, for ``MockStatistics/Counts/requestsByAccount``; `historyBody`
    /// is a Get Notification History request's body.
    func account(namedBy endpoint: Endpoint, parameter: String?, historyBody: [String: RawJSON]?, in world: AppWorld) -> String {
        let snapshot = world.catalog.snapshot
        let transactionId: String?
        switch endpoint {
        case .transactionHistory, .subscriptionStatuses, .sendConsumptionInformation, .setAppAccountToken: transactionId = parameter
        case .lookUpOrderId: transactionId = parameter.flatMap { snapshot.world.orders[$0]?.first }
        case .notificationHistory:
            guard let filter = historyBody?["transactionId"]?.string else { return "*" }
            transactionId = filter
        case .requestTestNotification, .testNotificationStatus: return "*"
        }
        return transactionId.flatMap { snapshot.account(ofTransaction: $0) } ?? "?"
    }

    /// Counts a request whose transaction ID this app does not have, when another app has it: a
    /// client that sent one app's customer under another app's `bid`.
    func noteCrossApp(transactionId: String, in world: AppWorld) {
        guard worlds.contains(where: { $0.scenario.bundleId != world.scenario.bundleId && $0.has(transactionId: transactionId) }) else { return }
        statistics.update(world.key) { $0.crossAppRequests += 1 }
        logger.warning(
            "a request named another app's transaction", metadata: ["bid": "\(world.scenario.bundleId)", "transactionId": "\(transactionId)"])
    }

    /// Counts a Look Up Order ID for an order of another app (see ``noteCrossApp(transactionId:in:)``).
    func noteCrossApp(orderId: String, in world: AppWorld) {
        guard worlds.contains(where: { $0.scenario.bundleId != world.scenario.bundleId && $0.has(orderId: orderId) }) else { return }
        statistics.update(world.key) { $0.crossAppRequests += 1 }
        logger.warning("a request named another app's order", metadata: ["bid": "\(world.scenario.bundleId)", "orderId": "\(orderId)"])
    }

    /// The filter a Get Notification History body carries, for ``MockStatistics/Counts/historyRequestsByFilter``.
    static func historyFilter(_ body: [String: RawJSON]?) -> String {
        guard let body else { return "?" }
        if body["transactionId"]?.string != nil { return "transactionId" }
        guard let type = body["notificationType"]?.string else { return "*" }
        return body["notificationSubtype"]?.string.map { "\(type)/\($0)" } ?? type
    }

    /// An endpoint's limit per app in `environment` (by default the first app's).
    func limit(for endpoint: Endpoint, environment: AppStoreEnvironment? = nil) -> Double {
        let share = (environment ?? primary.scenario.environment) == .production ? 1.0 : 0.1
        switch endpoint {
        case .requestTestNotification, .testNotificationStatus: return 1 * share
        case .lookUpOrderId: return min(configuration.rateLimitPerSecond ?? .infinity, 10 * share)
        case .setAppAccountToken: return min(configuration.rateLimitPerSecond ?? .infinity, 20 * share)
        default: return configuration.rateLimitPerSecond ?? 50 * share
        }
    }

    /// 429 with a `Retry-After` for `instant` (UNIX ms) in `format`; the rate limiter records the
    /// instant the header announces (whole-second forms round up) to count requests that come before it.
    func rateLimited(
        _ endpoint: Endpoint, until instant: Int64, request: MockHTTPRequest,
        format: FaultConfiguration.RetryAfterFormat, world: AppWorld
    ) -> MockHTTPResponse {
        let retryAfter = format.header(for: instant, now: Self.nowMilliseconds)
        world.rateLimiter.announce(endpoint: endpoint.rawValue, retryAfter: retryAfter.announced, at: request.arrivedAt)
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
