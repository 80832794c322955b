/// The body of an App Store Server API error response.
///
/// ```json
/// {"errorCode": 4290000, "errorMessage": "Rate limit exceeded."}
/// ```
public struct ErrorPayload: Codable, Hashable, Sendable {
    public var errorCode: Int64?
    public var errorMessage: String?

    public init(errorCode: Int64? = nil, errorMessage: String? = nil) {
        self.errorCode = errorCode
        self.errorMessage = errorMessage
    }
}
