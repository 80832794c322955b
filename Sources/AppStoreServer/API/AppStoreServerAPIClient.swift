import AsyncHTTPClient
import Crypto
import Foundation
import Logging
import NIOCore
import NIOFoundationCompat
import NIOHTTP1

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
/// A 429 closes the endpoint until its `Retry-After` instant (UNIX milliseconds) for every caller;
/// without the header the client backs off exponentially with jitter. 5xx, Apple's retryable
/// codes, connection failures, timeouts and truncated bodies are retried a bounded number of
/// times; 400, 401 and 404 fail at once with Apple's error code and message.
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

        public init(maximumAttempts: Int = 6, maximumRateLimitedAttempts: Int = 12,
                    initialBackoff: Duration = .milliseconds(500), maximumBackoff: Duration = .seconds(30),
                    retryAfterMargin: Duration = .milliseconds(100)) {
            self.maximumAttempts = maximumAttempts
            self.maximumRateLimitedAttempts = maximumRateLimitedAttempts
            self.initialBackoff = initialBackoff
            self.maximumBackoff = maximumBackoff
            self.retryAfterMargin = retryAfterMargin
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

        public init(baseURL: String? = nil, tokens: APIAuthenticationTokens.Configuration, environment: AppStoreEnvironment,
                    requestTimeout: Duration = .seconds(30), retryPolicy: RetryPolicy = RetryPolicy(),
                    requestsPerSecond: [AppStoreServerAPIEndpoint: Double]? = nil,
                    userAgent: String = "app-store-reconciler/1.0") {
            self.baseURL = baseURL ?? (environment == .production ? AppStoreServerAPIClient.productionURL : AppStoreServerAPIClient.sandboxURL)
            self.tokens = tokens
            self.environment = environment
            self.requestTimeout = requestTimeout
            self.retryPolicy = retryPolicy
            self.requestsPerSecond = requestsPerSecond
            self.userAgent = userAgent
        }
    }

    public let configuration: Configuration
    public let statistics: APIStatistics
    public let tokens: APIAuthenticationTokens
    private let rateLimiter: RateLimiter
    private let httpClient: HTTPClient
    private let logger: Logger
    private let baseURL: String

    /// - Parameters:
    ///   - rateLimiter: share one limiter between clients of the same app to share its budget.
    ///   - httpClient: defaults to the process-wide shared client.
    public init(configuration: Configuration, rateLimiter: RateLimiter? = nil, httpClient: HTTPClient = .shared,
                logger: Logger = Logger(label: "app-store-api")) {
        self.configuration = configuration
        self.statistics = APIStatistics()
        self.tokens = APIAuthenticationTokens(configuration: configuration.tokens)
        self.rateLimiter = rateLimiter ?? RateLimiter(
            requestsPerSecond: configuration.requestsPerSecond ?? RateLimiter.defaultBudget(environment: configuration.environment))
        self.httpClient = httpClient
        self.logger = logger
        var base = configuration.baseURL
        while base.hasSuffix("/") { base.removeLast() }
        self.baseURL = base
    }

    // MARK: Endpoints

    /// One page of Get Notification History. Prefer ``notificationHistory(_:startingAt:)``.
    public func getNotificationHistory(_ request: NotificationHistoryRequest, paginationToken: String? = nil) async throws -> NotificationHistoryResponse {
        let body = try JSONEncoder().encode(request)
        let query = paginationToken.map { [("paginationToken", $0)] } ?? []
        return try await send(.getNotificationHistory, method: .POST, path: "/inApps/v1/notifications/history", query: query, body: body)
    }

    /// One page of Get Transaction History v2. Prefer ``transactionHistory(anyTransactionId:_:)``.
    public func getTransactionHistory(anyTransactionId: String, _ request: TransactionHistoryRequest) async throws -> HistoryResponse {
        try await send(.getTransactionHistory, method: .GET,
                       path: "/inApps/v2/history/\(Self.percentEncoded(anyTransactionId))", query: request.queryItems, body: nil)
    }

    /// Get All Subscription Statuses, optionally only those with the given statuses.
    public func getAllSubscriptionStatuses(anyTransactionId: String, status: [Status] = []) async throws -> StatusResponse {
        try await send(.getAllSubscriptionStatuses, method: .GET,
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
        try await send(.getTestNotificationStatus, method: .GET,
                       path: "/inApps/v1/notifications/test/\(Self.percentEncoded(testNotificationToken))", query: [], body: nil)
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

    private func send<Response: Decodable>(
        _ endpoint: AppStoreServerAPIEndpoint, method: HTTPMethod, path: String,
        query: [(name: String, value: String)], body: Data?
    ) async throws -> Response {
        let url = baseURL + path + Self.queryString(query)
        let policy = configuration.retryPolicy
        var attempts = 0
        var failures = 0
        var rateLimitedResponses = 0
        while true {
            try await rateLimiter.waitForTurn(endpoint)
            attempts += 1
            statistics.record(.request)
            if attempts > 1 { statistics.record(.retry) }

            let outcome = await attempt(endpoint, method: method, url: url, body: body)
            try Task.checkCancellation()
            let details = { (status: Int?, payload: ErrorPayload?) in
                AppStoreServerAPIError.Details(
                    endpoint: endpoint, httpStatusCode: status, errorCode: payload?.errorCode.map(APIErrorCode.init(rawValue:)),
                    errorMessage: payload?.errorMessage, attempts: attempts)
            }
            let retryable: AppStoreServerAPIError
            switch outcome {
            case .success(let status, let bytes):
                if let decoded = try? JSONDecoder().decode(Response.self, from: Data(buffer: bytes)) {
                    return decoded
                }
                retryable = .invalidResponse(details(status, ErrorPayload(errorMessage: "the body is not a \(Response.self)")))
            case .rateLimited(let retryAfter, let payload):
                statistics.record(.rateLimited)
                rateLimitedResponses += 1
                let error = AppStoreServerAPIError.rateLimited(details(429, payload))
                guard rateLimitedResponses < policy.maximumRateLimitedAttempts else {
                    statistics.record(.failedCall)
                    throw error
                }
                let until: ContinuousClock.Instant
                if let retryAfter {
                    until = rateLimiter.instant(forUNIXMilliseconds: retryAfter, margin: policy.retryAfterMargin)
                } else {
                    until = ContinuousClock().now + backoff(afterFailures: rateLimitedResponses)
                }
                logger.debug("rate limited", metadata: ["endpoint": "\(endpoint.name)", "retryAfter": "\(retryAfter.map(String.init) ?? "none")"])
                await rateLimiter.close(endpoint, until: until)
                continue
            case .failure(let status, let payload):
                let code = payload?.errorCode.map(APIErrorCode.init(rawValue:))
                switch status {
                case 401:
                    statistics.record(.failedCall)
                    throw AppStoreServerAPIError.unauthorized(details(status, payload))
                case 400 where code == .paginationTokenExpired:
                    statistics.record(.failedCall)
                    throw AppStoreServerAPIError.paginationTokenExpired(details(status, payload))
                case 400:
                    statistics.record(.failedCall)
                    throw AppStoreServerAPIError.badRequest(details(status, payload))
                case 404 where code?.isRetryable == true:
                    retryable = .notFound(details(status, payload))
                case 404:
                    statistics.record(.failedCall)
                    throw AppStoreServerAPIError.notFound(details(status, payload))
                case 500...599:
                    statistics.record(.serverError)
                    retryable = .serverError(details(status, payload))
                default:
                    statistics.record(.failedCall)
                    throw AppStoreServerAPIError.unexpectedStatus(details(status, payload))
                }
            case .transportFailure(let description):
                statistics.record(.transportError)
                retryable = .transport(details(nil, ErrorPayload(errorMessage: description)))
            }
            failures += 1
            guard failures < policy.maximumAttempts else {
                statistics.record(.failedCall)
                throw retryable
            }
            let delay = backoff(afterFailures: failures)
            logger.debug("retrying", metadata: ["endpoint": "\(endpoint.name)", "error": "\(retryable)", "delay": "\(delay)"])
            try await Task.sleep(for: delay)
        }
    }

    private enum AttemptOutcome {
        case success(status: Int, body: ByteBuffer)
        case rateLimited(retryAfter: Int64?, payload: ErrorPayload?)
        case failure(status: Int, payload: ErrorPayload?)
        case transportFailure(String)
    }

    private func attempt(_ endpoint: AppStoreServerAPIEndpoint, method: HTTPMethod, url: String, body: Data?) async -> AttemptOutcome {
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
            let timeout = TimeAmount.nanoseconds(Int64(configuration.requestTimeout.components.seconds) * 1_000_000_000
                + configuration.requestTimeout.components.attoseconds / 1_000_000_000)
            let response = try await httpClient.execute(request, timeout: timeout)
            let bytes = try await response.body.collect(upTo: 16 * 1024 * 1024)
            let status = Int(response.status.code)
            if (200..<300).contains(status) {
                return .success(status: status, body: bytes)
            }
            let payload = try? JSONDecoder().decode(ErrorPayload.self, from: Data(buffer: bytes))
            if status == 429 {
                let retryAfter = response.headers.first(name: "Retry-After").flatMap { Int64($0.trimmingCharacters(in: .whitespaces)) }
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
