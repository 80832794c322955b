/// The body of an App Store Server API error response.
///
/// [Error codes](https://developer.apple.com/documentation/appstoreserverapi/error-codes)
///
/// ```json
/// {"errorCode": 4290000, "errorMessage": "Rate limit exceeded."}
/// ```
public struct ErrorPayload: Codable, Hashable, Sendable {
    /// The code of the error, such as `4290000` for a rate limit or `5000001` for a retryable internal error.
    ///
    /// [Error codes](https://developer.apple.com/documentation/appstoreserverapi/error-codes)
    public var errorCode: Int64?

    /// The description of the error, such as `Rate limit exceeded.`.
    ///
    /// [Error codes](https://developer.apple.com/documentation/appstoreserverapi/error-codes)
    public var errorMessage: String?

    public init(errorCode: Int64? = nil, errorMessage: String? = nil) {
        self.errorCode = errorCode
        self.errorMessage = errorMessage
    }
}
