/// The success or error information the App Store server records when it attempts to send an App Store server notification to your server.
///
/// [sendAttemptResult](https://developer.apple.com/documentation/appstoreserverapi/sendattemptresult)
///
/// Values Apple adds later decode without error and keep their raw value.
public struct SendAttemptResult: AppleEnumeration {
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    /// Your server answered the notification with success (`SUCCESS`).
    public static let success = SendAttemptResult(rawValue: "SUCCESS")
    /// The request to your server timed out (`TIMED_OUT`).
    public static let timedOut = SendAttemptResult(rawValue: "TIMED_OUT")
    /// A TLS problem prevented a secure connection to your server (`TLS_ISSUE`).
    public static let tlsIssue = SendAttemptResult(rawValue: "TLS_ISSUE")
    /// Your server redirected the request in a loop (`CIRCULAR_REDIRECT`).
    public static let circularRedirect = SendAttemptResult(rawValue: "CIRCULAR_REDIRECT")
    /// Your server didn't respond (`NO_RESPONSE`).
    public static let noResponse = SendAttemptResult(rawValue: "NO_RESPONSE")
    /// A socket problem occurred while sending the notification (`SOCKET_ISSUE`).
    public static let socketIssue = SendAttemptResult(rawValue: "SOCKET_ISSUE")
    /// Your server's response used a character set the App Store doesn't support (`UNSUPPORTED_CHARSET`).
    public static let unsupportedCharset = SendAttemptResult(rawValue: "UNSUPPORTED_CHARSET")
    /// Your server's response was invalid (`INVALID_RESPONSE`).
    public static let invalidResponse = SendAttemptResult(rawValue: "INVALID_RESPONSE")
    /// The connection closed before your server's response was complete (`PREMATURE_CLOSE`).
    public static let prematureClose = SendAttemptResult(rawValue: "PREMATURE_CLOSE")
    /// Your server answered with an unsuccessful HTTP status code (`UNSUCCESSFUL_HTTP_RESPONSE_CODE`).
    public static let unsuccessfulHTTPResponseCode = SendAttemptResult(rawValue: "UNSUCCESSFUL_HTTP_RESPONSE_CODE")
    /// Another error occurred (`OTHER`).
    public static let other = SendAttemptResult(rawValue: "OTHER")

    public static let knownValues: [SendAttemptResult] = [
        .success, .timedOut, .tlsIssue, .circularRedirect, .noResponse, .socketIssue, .unsupportedCharset, .invalidResponse, .prematureClose,
        .unsuccessfulHTTPResponseCode, .other,
    ]
}
