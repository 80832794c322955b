/// The success or error information the App Store server records when it attempts to send an App Store server notification to your server.
///
/// Values Apple adds later decode without error and keep their raw value.
public struct SendAttemptResult: AppleEnumeration {
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    public static let success = SendAttemptResult(rawValue: "SUCCESS")
    public static let timedOut = SendAttemptResult(rawValue: "TIMED_OUT")
    public static let tlsIssue = SendAttemptResult(rawValue: "TLS_ISSUE")
    public static let circularRedirect = SendAttemptResult(rawValue: "CIRCULAR_REDIRECT")
    public static let noResponse = SendAttemptResult(rawValue: "NO_RESPONSE")
    public static let socketIssue = SendAttemptResult(rawValue: "SOCKET_ISSUE")
    public static let unsupportedCharset = SendAttemptResult(rawValue: "UNSUPPORTED_CHARSET")
    public static let invalidResponse = SendAttemptResult(rawValue: "INVALID_RESPONSE")
    public static let prematureClose = SendAttemptResult(rawValue: "PREMATURE_CLOSE")
    public static let unsuccessfulHTTPResponseCode = SendAttemptResult(rawValue: "UNSUCCESSFUL_HTTP_RESPONSE_CODE")
    public static let other = SendAttemptResult(rawValue: "OTHER")

    public static let knownValues: [SendAttemptResult] = [.success, .timedOut, .tlsIssue, .circularRedirect, .noResponse, .socketIssue, .unsupportedCharset, .invalidResponse, .prematureClose, .unsuccessfulHTTPResponseCode, .other]
}
