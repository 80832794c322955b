public import AsyncHTTPClient
import Crypto
public import Foundation
public import Logging
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import Synchronization

/// A client of the App Store Server API: authentication, the endpoints the reconciler needs,
/// retries with backoff, and a process-wide request budget.
///
/// ```swift
/// let client = AppStoreServerAPIClient(configuration: .init(
///     baseURL: AppStoreServerAPIClient.productionURL,
///     tokens: .init(privateKey: key, keyId: "ABC123DEFG", issuerId: issuer, bundleId: "com.example.app"),
///     environment: .production))
/// for try await page in client.notificationHistory(NotificationHistoryRequest(startDate: s, endDate: e)) {
///     for item in page.response.notificationHistory ?? [] { ... }
/// }
/// ```
///
/// A 429 closes the endpoint until its `Retry-After` instant for every caller (Apple's UNIX
/// milliseconds, a proxy's delta-seconds or an HTTP-date: ``RetryAfter``); without a header it
/// understands, the client backs off exponentially with jitter. An instant further away than
/// ``RetryPolicy/maximumRetryAfter`` is not waited for: that call, and every call to the endpoint
/// until the instant, fails at once with ``AppStoreServerAPIError/retryAfterTooLong(_:reopensAt:)``.
/// 5xx, Apple's retryable codes, connection failures, timeouts and truncated bodies are retried a
/// bounded number of times; 400, 401 and 404 fail at once with Apple's error code and message.
public struct AppStoreServerAPIClient: Sendable {
    public static let productionURL = "https://api.storekit.apple.com"
    public static let sandboxURL = "https://api.storekit-sandbox.apple.com"

    public struct RetryPolicy: Sendable {
        /// Attempts per call for 5xx, retryable codes and transport failures (the first included).
        public var maximumAttempts: Int
        /// Attempts per call for 429 responses (the first included).
        public var maximumRateLimitedAttempts: Int
        /// The first backoff; each further one doubles, with jitter, up to ``maximumBackoff``.
        public var initialBackoff: Duration
        public var maximumBackoff: Duration
        /// Added to every `Retry-After` instant to absorb clock differences.
        public var retryAfterMargin: Duration
        /// The longest wait for a closed endpoint (a `Retry-After` instant plus the margin); a call
        /// that would wait longer fails with ``AppStoreServerAPIError/retryAfterTooLong(_:reopensAt:)``
        /// instead, so a run ends that piece of work for the next run rather than sleeping.
        public var maximumRetryAfter: Duration

        public init(
            maximumAttempts: Int = 6, maximumRateLimitedAttempts: Int = 12,
            initialBackoff: Duration = .milliseconds(500), maximumBackoff: Duration = .seconds(30),
            retryAfterMargin: Duration = .milliseconds(100), maximumRetryAfter: Duration = .seconds(120)
        ) {
            self.maximumAttempts = maximumAttempts
            self.maximumRateLimitedAttempts = maximumRateLimitedAttempts
            self.initialBackoff = initialBackoff
            self.maximumBackoff = maximumBackoff
            self.retryAfterMargin = retryAfterMargin
            self.maximumRetryAfter = maximumRetryAfter
        }
    }

    public struct Configuration: Sendable {
        /// `productionURL`, `sandboxURL`, or a mock (`APP_STORE_API_BASE_URL`).
        public var baseURL: String
        public var tokens: APIAuthenticationTokens.Configuration
        public var environment: AppStoreEnvironment
        public var requestTimeout: Duration
        public var retryPolicy: RetryPolicy
        /// Requests per second per endpoint; `nil` means 80% of Apple's limits (10% of that in the sandbox).
        public var requestsPerSecond: [AppStoreServerAPIEndpoint: Double]?
        public var userAgent: String
        /// The time backoffs are waited on, and the rate limiter's turns and `Retry-After`
        /// closures judged by when the client makes its own limiter (one handed to the client
        /// keeps its own clock).
        public var clock: any MonotonicClock

        public init(
            baseURL: String? = nil, tokens: APIAuthenticationTokens.Configuration, environment: AppStoreEnvironment,
            requestTimeout: Duration = .seconds(30), retryPolicy: RetryPolicy = RetryPolicy(),
            requestsPerSecond: [AppStoreServerAPIEndpoint: Double]? = nil,
            userAgent: String = "app-store-reconciler/1.0", clock: any MonotonicClock = .system
        ) {
            self.baseURL = baseURL ?? (environment == .production ? AppStoreServerAPIClient.productionURL : AppStoreServerAPIClient.sandboxURL)
            self.tokens = tokens
            self.environment = environment
            self.requestTimeout = requestTimeout
            self.retryPolicy = retryPolicy
            self.requestsPerSecond = requestsPerSecond
            self.userAgent = userAgent
            self.clock = clock
        }
    }

    public let configuration: Configuration
    public let statistics: APIStatistics
    public let tokens: APIAuthenticationTokens
    /// The request budget this client spends (shared by every client given the same limiter).
    public let rateLimiter: RateLimiter
    private let httpClient: HTTPClient
    private let logger: Logger
    private let baseURL: String

    /// - Parameters:
    ///   - rateLimiter: share one limiter between clients of the same app to share its budget.
    ///   - httpClient: defaults to the process-wide shared client.
    public init(
        configuration: Configuration, rateLimiter: RateLimiter? = nil, httpClient: HTTPClient = .shared,
        logger: Logger = Logger(label: "app-store-api")
    ) {
        self.configuration = configuration
        self.statistics = APIStatistics()
        self.tokens = APIAuthenticationTokens(configuration: configuration.tokens)
        self.rateLimiter =
            rateLimiter
            ?? RateLimiter(
                configuration: .init(
                    requestsPerSecond: configuration.requestsPerSecond ?? RateLimiter.defaultBudget(environment: configuration.environment),
                    clock: configuration.clock))
        self.httpClient = httpClient
        self.logger = logger
        var base = configuration.baseURL
        while base.hasSuffix("/") { base.removeLast() }
        self.baseURL = base
    }

    /// The request budget this client keeps to, requests per second per endpoint (its rate
    /// limiter's, which may be shared with other clients); endpoints not listed are not limited.
    public var requestsPerSecond: [AppStoreServerAPIEndpoint: Double] { rateLimiter.requestsPerSecond }

    // MARK: Endpoints

    /// One page of Get Notification History. Prefer ``notificationHistory(_:startingAt:)``.
    public func getNotificationHistory(
        _ request: NotificationHistoryRequest, paginationToken: String? = nil
    ) async throws -> NotificationHistoryResponse {
        let body = try JSONEncoder().encode(request)
        let query = paginationToken.map { [("paginationToken", $0)] } ?? []
        return try await send(.getNotificationHistory, method: .POST, path: "/inApps/v1/notifications/history", query: query, body: body)
    }

    /// One page of Get Transaction History v2. Prefer ``transactionHistory(anyTransactionId:_:)``.
    public func getTransactionHistory(anyTransactionId: String, _ request: TransactionHistoryRequest) async throws -> HistoryResponse {
        try await send(
            .getTransactionHistory, method: .GET,
            path: "/inApps/v2/history/\(Self.percentEncoded(anyTransactionId))", query: request.queryItems, body: nil)
    }

    /// Get All Subscription Statuses, optionally only those with the given statuses.
    public func getAllSubscriptionStatuses(anyTransactionId: String, status: [Status] = []) async throws -> StatusResponse {
        try await send(
            .getAllSubscriptionStatuses, method: .GET,
            path: "/inApps/v1/subscriptions/\(Self.percentEncoded(anyTransactionId))",
            query: status.map { ("status", String($0.rawValue)) }, body: nil)
    }

    /// Look Up Order ID: the signed transactions of the order ID on the customer's receipt email.
    ///
    /// An order ID that is unknown, malformed or holds no purchase of this app is not an error:
    /// Apple answers 200 with status ``OrderLookupStatus/invalid`` and no transactions.
    ///
    /// ```swift
    /// let order = try await client.lookUpOrderId("MQ5Q7X2ZYB")
    /// ```
    public func lookUpOrderId(_ orderId: String) async throws -> OrderLookupResponse {
        try await send(.lookUpOrderId, method: .GET, path: "/inApps/v1/lookup/\(Self.percentEncoded(orderId))", query: [], body: nil)
    }

    /// Request a Test Notification: Apple sends a TEST notification to the configured URL.
    public func requestTestNotification() async throws -> SendTestNotificationResponse {
        try await send(.requestTestNotification, method: .POST, path: "/inApps/v1/notifications/test", query: [], body: nil)
    }

    /// Get Test Notification Status for a token from ``requestTestNotification()``.
    public func getTestNotificationStatus(testNotificationToken: String) async throws -> CheckTestNotificationResponse {
        try await send(
            .getTestNotificationStatus, method: .GET,
            path: "/inApps/v1/notifications/test/\(Self.percentEncoded(testNotificationToken))", query: [], body: nil)
    }

    /// Send Consumption Information (V2): the app's answer to a `CONSUMPTION_REQUEST` for
    /// `transactionId` (the notification's transaction). Apple answers 202 with no body; a PUT of
    /// the same answer is idempotent, so a 5xx is retried like any other call.
    ///
    /// ```swift
    /// try await client.sendConsumptionInformation(
    ///     transactionId: "2000000100000317",
    ///     ConsumptionRequest(customerConsented: true, deliveryStatus: .delivered, sampleContentProvided: false))
    /// ```
    public func sendConsumptionInformation(transactionId: String, _ request: ConsumptionRequest) async throws {
        let _: NoContent = try await send(
            .sendConsumptionInformation, method: .PUT, path: "/inApps/v2/transactions/consumption/\(Self.percentEncoded(transactionId))",
            query: [], body: try JSONEncoder().encode(request))
    }

    /// Set App Account Token: sets or replaces the `appAccountToken` of the purchase
    /// `originalTransactionId` names (its latest transaction and renewal info, and later renewals;
    /// not past transactions). Apple answers 200 with no body; the same PUT again sets the same
    /// value, so a 5xx is retried like any other call.
    ///
    /// ```swift
    /// try await client.setAppAccountToken(
    ///     originalTransactionId: "2000000100000317",
    ///     UpdateAppAccountTokenRequest(appAccountToken: "7e3fb20b-4cdb-47cc-936d-99d65f608138"))
    /// ```
    public func setAppAccountToken(originalTransactionId: String, _ request: UpdateAppAccountTokenRequest) async throws {
        let _: NoContent = try await send(
            .setAppAccountToken, method: .PUT,
            path: "/inApps/v1/transactions/\(Self.percentEncoded(originalTransactionId))/appAccountToken",
            query: [], body: try JSONEncoder().encode(request))
    }

    /// When a response came and what its `Date` header said: how far this host's clock is from
    /// Apple's is the `Date` against the request's midpoint (the header has whole seconds).
    public struct ResponseTiming: Sendable, Hashable {
        public var sentAt: Date
        public var receivedAt: Date
        /// The response's `Date` header (an IMF-fixdate), when it had one that parses.
        public var serverDate: Date?

        public init(sentAt: Date, receivedAt: Date, serverDate: Date?) {
            self.sentAt = sentAt
            self.receivedAt = receivedAt
            self.serverDate = serverDate
        }

        public var midpoint: Date { sentAt.addingTimeInterval(receivedAt.timeIntervalSince(sentAt) / 2) }
    }

    /// What one cheap authenticated request saw (``probe(now:)``).
    public struct Probe: Sendable {
        /// `nil`: Apple answered 2xx, so it accepts the key for this app and environment.
        public var error: AppStoreServerAPIError?
        /// The last response's timing, whatever its status (a 401 carries a `Date` too).
        public var timing: ResponseTiming?
    }

    /// One cheap authenticated request, for a check of the key and the clock: a page of Get
    /// Notification History over one second an hour ago (an hour back, so a clock minutes ahead
    /// still asks for the past). It spends one request of that endpoint's budget.
    public func probe(now: Date = Date()) async throws -> Probe {
        let start = RetryAfter.milliseconds(of: now) - 3_600_000
        let timing = Mutex<ResponseTiming?>(nil)
        do {
            let body = try JSONEncoder().encode(NotificationHistoryRequest(startDate: start, endDate: start + 1000))
            let _: NotificationHistoryResponse = try await send(
                .getNotificationHistory, method: .POST, path: "/inApps/v1/notifications/history", query: [], body: body,
                observing: { seen in timing.withLock { $0 = seen } })
            return Probe(error: nil, timing: timing.withLock { $0 })
        } catch let error as AppStoreServerAPIError {
            return Probe(error: error, timing: timing.withLock { $0 })
        }
    }

    // MARK: Paging

    /// The pages of a notification history query, fetched one at a time as they are consumed.
    ///
    /// - Parameter paginationToken: resume after a page fetched earlier (a stored checkpoint).
    public func notificationHistory(_ request: NotificationHistoryRequest, startingAt paginationToken: String? = nil) -> NotificationHistoryPages {
        NotificationHistoryPages(client: self, request: request, firstToken: paginationToken)
    }

    /// The pages of a transaction history query, fetched one at a time as they are consumed;
    /// each page's request carries the previous page's `revision` and the same filters.
    public func transactionHistory(anyTransactionId: String, _ request: TransactionHistoryRequest) -> TransactionHistoryPages {
        TransactionHistoryPages(client: self, anyTransactionId: anyTransactionId, request: request)
    }

    // MARK: Transport

    /// Sends one call: waits for its turn, sends, and either returns the decoded body, throws, or
    /// waits (for the endpoint to reopen, or a backoff) and sends again.
    private func send<Response: Decodable>(
        _ endpoint: AppStoreServerAPIEndpoint, method: HTTPMethod, path: String,
        query: [(name: String, value: String)], body: Data?, observing: (@Sendable (ResponseTiming) -> Void)? = nil
    ) async throws -> Response {
        let url = baseURL + path + Self.queryString(query)
        var call = CallProgress()
        while true {
            try await waitForTurn(endpoint, call: call)
            call.attempts += 1
            statistics.record(.request, endpoint: endpoint)
            if call.attempts > 1 { statistics.record(.retry, endpoint: endpoint) }
            let outcome = await attempt(endpoint, method: method, url: url, body: body, observing: observing)
            try Task.checkCancellation()
            let failure: CallFailure
            switch judge(outcome, endpoint: endpoint, attempts: call.attempts, as: Response.self) {
            case .success(let response): return response
            case .failure(let judged): failure = judged
            }
            switch nextStep(after: failure, call: &call) {
            case .fail(let error, let closing):
                if let closing { await rateLimiter.close(endpoint, for: closing) }
                statistics.record(.failedCall)
                throw error
            case .waitForEndpoint(let delay):
                await rateLimiter.close(endpoint, for: delay)
            case .sleep(let delay):
                logger.debug("retrying", metadata: ["endpoint": "\(endpoint.name)", "error": "\(failure.error)", "delay": "\(delay)"])
                try await configuration.clock.sleep(for: delay)
            }
        }
    }

    /// What a call counts between its attempts.
    private struct CallProgress {
        /// Requests sent.
        var attempts = 0
        /// Retryable failures (5xx, retryable codes, transport, bad bodies).
        var failures = 0
        /// 429 responses.
        var rateLimitedResponses = 0
    }

    /// What a response that is not a success means for the call.
    private enum CallFailure: Error {
        /// 429, with the `Retry-After` instant when the header was understood.
        case rateLimited(RetryAfter?, AppStoreServerAPIError)
        /// Worth sending again after a backoff.
        case retryable(AppStoreServerAPIError)
        /// Never worth sending again.
        case final(AppStoreServerAPIError)

        var error: AppStoreServerAPIError {
            switch self {
            case .rateLimited(_, let error), .retryable(let error), .final(let error): error
            }
        }
    }

    /// What the call does after a failure.
    private enum NextStep {
        /// Throw, after closing the endpoint for every caller for the time when one is given.
        case fail(AppStoreServerAPIError, closingEndpointFor: Duration? = nil)
        /// Close the endpoint for every caller (this one included) for the time, then send again.
        case waitForEndpoint(for: Duration)
        /// Sleep, then send again.
        case sleep(Duration)
    }

    /// Waits for the rate limiter; an endpoint closed for longer than the policy allows fails the call.
    private func waitForTurn(_ endpoint: AppStoreServerAPIEndpoint, call: CallProgress) async throws {
        do {
            try await rateLimiter.waitForTurn(endpoint, longestClosure: configuration.retryPolicy.maximumRetryAfter)
        } catch let closed as RateLimiter.EndpointClosed {
            statistics.record(.failedCall)
            throw AppStoreServerAPIError.retryAfterTooLong(.init(endpoint: endpoint, attempts: call.attempts), reopensAt: closed.reopensAt)
        }
    }

    /// Classifies one attempt's outcome: the decoded body, or how it failed (and counts 429s, 5xx
    /// and transport failures).
    private func judge<Response: Decodable>(
        _ outcome: AttemptOutcome, endpoint: AppStoreServerAPIEndpoint, attempts: Int, as type: Response.Type
    ) -> Result<Response, CallFailure> {
        func details(_ status: Int?, _ payload: ErrorPayload?) -> AppStoreServerAPIError.Details {
            AppStoreServerAPIError.Details(
                endpoint: endpoint, httpStatusCode: status, errorCode: payload?.errorCode.map(APIErrorCode.init(rawValue:)),
                errorMessage: payload?.errorMessage, attempts: attempts)
        }
        switch outcome {
        case .success(let status, let bytes):
            // An endpoint that answers 2xx without a body (202 Accepted).
            if let empty = NoContent() as? Response { return .success(empty) }
            if let decoded = try? JSONDecoder().decode(Response.self, from: Data(buffer: bytes)) {
                return .success(decoded)
            }
            return .failure(.retryable(.invalidResponse(details(status, ErrorPayload(errorMessage: "the body is not a \(Response.self)")))))
        case .rateLimited(let retryAfter, let payload):
            statistics.record(.rateLimited, endpoint: endpoint)
            return .failure(.rateLimited(retryAfter, .rateLimited(details(429, payload))))
        case .failure(let status, let payload):
            let code = payload?.errorCode.map(APIErrorCode.init(rawValue:))
            switch status {
            case 401: return .failure(.final(.unauthorized(details(status, payload))))
            case 400 where code == .paginationTokenExpired: return .failure(.final(.paginationTokenExpired(details(status, payload))))
            case 400: return .failure(.final(.badRequest(details(status, payload))))
            case 404 where code?.isRetryable == true: return .failure(.retryable(.notFound(details(status, payload))))
            case 404: return .failure(.final(.notFound(details(status, payload))))
            case 500...599:
                statistics.record(.serverError)
                // Apple lists 5000000 GeneralInternalError apart from its retryable 5000001.
                if code == .generalInternal { return .failure(.final(.serverError(details(status, payload)))) }
                return .failure(.retryable(.serverError(details(status, payload))))
            default: return .failure(.final(.unexpectedStatus(details(status, payload))))
            }
        case .transportFailure(let description):
            statistics.record(.transportError)
            return .failure(.retryable(.transport(details(nil, ErrorPayload(errorMessage: description)))))
        }
    }

    /// Decides between failing, waiting for the endpoint to reopen, and a backoff, within the policy's bounds.
    private func nextStep(after failure: CallFailure, call: inout CallProgress) -> NextStep {
        let policy = configuration.retryPolicy
        switch failure {
        case .final(let error):
            return .fail(error)
        case .rateLimited(let retryAfter, let error):
            call.rateLimitedResponses += 1
            let closedFor = closingTime(after: retryAfter, rateLimitedResponses: call.rateLimitedResponses)
            logger.debug(
                "rate limited",
                metadata: [
                    "endpoint": "\(error.details.endpoint.name)", "retryAfter": "\(retryAfter.map(String.init(describing:)) ?? "none")",
                ])
            if closedFor > policy.maximumRetryAfter {
                let reopensAt = RetryAfter.milliseconds(of: Date(), plus: closedFor)
                return .fail(.retryAfterTooLong(error.details, reopensAt: reopensAt), closingEndpointFor: closedFor)
            }
            guard call.rateLimitedResponses < policy.maximumRateLimitedAttempts else { return .fail(error) }
            return .waitForEndpoint(for: closedFor)
        case .retryable(let error):
            call.failures += 1
            guard call.failures < policy.maximumAttempts else { return .fail(error) }
            return .sleep(backoff(afterFailures: call.failures))
        }
    }

    /// How long a rate-limited endpoint stays closed from now: until the `Retry-After` instant
    /// plus the margin, or a backoff.
    private func closingTime(after retryAfter: RetryAfter?, rateLimitedResponses: Int) -> Duration {
        guard let retryAfter else { return backoff(afterFailures: rateLimitedResponses) }
        return retryAfter.delay() + configuration.retryPolicy.retryAfterMargin
    }

    /// What a 2xx without a body decodes to.
    private struct NoContent: Decodable {}

    private enum AttemptOutcome {
        case success(status: Int, body: ByteBuffer)
        case rateLimited(retryAfter: RetryAfter?, payload: ErrorPayload?)
        case failure(status: Int, payload: ErrorPayload?)
        case transportFailure(String)
    }

    private func attempt(
        _ endpoint: AppStoreServerAPIEndpoint, method: HTTPMethod, url: String, body: Data?, observing: (@Sendable (ResponseTiming) -> Void)?
    ) async -> AttemptOutcome {
        do {
            var request = HTTPClientRequest(url: url)
            request.method = method
            request.headers.add(name: "Authorization", value: "Bearer \(try tokens.token())")
            request.headers.add(name: "Accept", value: "application/json")
            request.headers.add(name: "User-Agent", value: configuration.userAgent)
            if let body {
                request.headers.add(name: "Content-Type", value: "application/json")
                request.body = .bytes(ByteBuffer(data: body))
            } else if method == .POST {
                request.headers.add(name: "Content-Length", value: "0")
            }
            let timeout = TimeAmount.nanoseconds(
                Int64(configuration.requestTimeout.components.seconds) * 1_000_000_000
                    + configuration.requestTimeout.components.attoseconds / 1_000_000_000)
            let sentAt = Date()
            let response = try await httpClient.execute(request, timeout: timeout)
            if let observing {
                let date = response.headers.first(name: "Date").flatMap { RetryAfter(headerValue: $0) }.flatMap { header in
                    header.form == .httpDate ? Date(timeIntervalSince1970: Double(header.unixMilliseconds) / 1000) : nil
                }
                observing(ResponseTiming(sentAt: sentAt, receivedAt: Date(), serverDate: date))
            }
            let bytes = try await response.body.collect(upTo: 16 * 1024 * 1024)
            let status = Int(response.status.code)
            if (200..<300).contains(status) {
                return .success(status: status, body: bytes)
            }
            let payload = try? JSONDecoder().decode(ErrorPayload.self, from: Data(buffer: bytes))
            if status == 429 {
                let retryAfter = response.headers.first(name: "Retry-After").flatMap { RetryAfter(headerValue: $0) }
                return .rateLimited(retryAfter: retryAfter, payload: payload)
            }
            return .failure(status: status, payload: payload)
        } catch is CancellationError {
            return .transportFailure("cancelled")
        } catch {
            return .transportFailure(String(describing: error))
        }
    }

    /// Exponential backoff with "equal jitter": half fixed, half random.
    private func backoff(afterFailures failures: Int) -> Duration {
        let policy = configuration.retryPolicy
        let exponent = min(failures - 1, 16)
        let base = min(policy.initialBackoff * (1 << exponent), policy.maximumBackoff)
        let half = base / 2
        return half + half * Double.random(in: 0...1)
    }

    static func percentEncoded(_ value: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return value.addingPercentEncoding(withAllowedCharacters: allowed) ?? value
    }

    static func queryString(_ items: [(name: String, value: String)]) -> String {
        guard !items.isEmpty else { return "" }
        return "?" + items.map { "\(percentEncoded($0.name))=\(percentEncoded($0.value))" }.joined(separator: "&")
    }
}
