import Foundation

/// A failed App Store Server API call, after any retries the client allows.
///
/// Each case carries Apple's `errorCode` and message when the response had them.
/// ``paginationTokenExpired(_:)`` is its own case so a caller can restart that query from its start.
public enum AppStoreServerAPIError: Error, CustomStringConvertible, Sendable {
    /// 400 with 4000017: restart the query without a pagination token.
    case paginationTokenExpired(Details)
    /// 401: the key, key id, issuer id or bundle id is wrong. Never retried.
    /// (A command line names its own settings to check; this module does not know them.)
    case unauthorized(Details)
    /// 400 other than an expired token: a request field is invalid. Never retried.
    case badRequest(Details)
    /// 404 that is not one of Apple's retryable codes. Never retried.
    case notFound(Details)
    /// 429 still returned after the allowed retries.
    case rateLimited(Details)
    /// The endpoint is closed by a 429's `Retry-After` until `reopensAt` (UNIX milliseconds),
    /// further away than ``AppStoreServerAPIClient/RetryPolicy/maximumRetryAfter``: the call failed
    /// at once instead of waiting, as does every call to the endpoint until then. `attempts` is 0
    /// when no request was sent (another call had seen the 429).
    case retryAfterTooLong(Details, reopensAt: Int64)
    /// 5xx or a retryable error code still returned after the allowed retries.
    case serverError(Details)
    /// Connection failures, timeouts or truncated bodies still happening after the allowed retries.
    case transport(Details)
    /// A 2xx response whose body is not what Apple documents, after the allowed retries.
    case invalidResponse(Details)
    /// Any other status.
    case unexpectedStatus(Details)

    public struct Details: Sendable, CustomStringConvertible {
        public var endpoint: AppStoreServerAPIEndpoint
        public var httpStatusCode: Int?
        public var errorCode: APIErrorCode?
        public var errorMessage: String?
        /// How many requests were sent for this call.
        public var attempts: Int

        public init(
            endpoint: AppStoreServerAPIEndpoint, httpStatusCode: Int? = nil, errorCode: APIErrorCode? = nil,
            errorMessage: String? = nil, attempts: Int
        ) {
            self.endpoint = endpoint
            self.httpStatusCode = httpStatusCode
            self.errorCode = errorCode
            self.errorMessage = errorMessage
            self.attempts = attempts
        }

        public var description: String {
            var parts = ["\(endpoint.name)"]
            if let httpStatusCode { parts.append("HTTP \(httpStatusCode)") }
            if let errorCode { parts.append("errorCode \(errorCode)" + (errorCode.name.map { " \($0)" } ?? "")) }
            if let field = errorCode?.field { parts.append("bad field: \(field)") }
            if let errorMessage, !errorMessage.isEmpty { parts.append(errorMessage) }
            parts.append(attempts == 0 ? "no request sent" : "after \(attempts) attempt\(attempts == 1 ? "" : "s")")
            return parts.joined(separator: ", ")
        }
    }

    public var details: Details {
        switch self {
        case .paginationTokenExpired(let d), .unauthorized(let d), .badRequest(let d), .notFound(let d),
            .rateLimited(let d), .retryAfterTooLong(let d, _), .serverError(let d), .transport(let d), .invalidResponse(let d),
            .unexpectedStatus(let d):
            d
        }
    }

    public var description: String {
        switch self {
        case .paginationTokenExpired(let d): "pagination token expired (\(d))"
        case .unauthorized(let d): "unauthorized: the key, key id, issuer id or bundle id is wrong (\(d))"
        case .badRequest(let d): "bad request (\(d))"
        case .notFound(let d): "not found (\(d))"
        case .rateLimited(let d): "rate limited (\(d))"
        case .retryAfterTooLong(let d, let reopensAt):
            "rate limited: the endpoint reopens at \(Date(timeIntervalSince1970: Double(reopensAt) / 1000).formatted(.iso8601)), "
                + "later than this client waits (\(d))"
        case .serverError(let d): "App Store server error (\(d))"
        case .transport(let d): "connection failed (\(d))"
        case .invalidResponse(let d): "invalid response (\(d))"
        case .unexpectedStatus(let d): "unexpected response (\(d))"
        }
    }
}
