/// The success or error information and the date the App Store server records when it attempts to send a notification to your server.
///
/// [sendAttemptItem](https://developer.apple.com/documentation/appstoreserverapi/sendattemptitem)
public struct SendAttemptItem: Codable, Hashable, Sendable {
    /// The UNIX time, in milliseconds, that the App Store server attempted to send the notification.
    ///
    /// [attemptDate](https://developer.apple.com/documentation/appstoreservernotifications/attemptdate)
    public var attemptDate: Int64?

    /// The success or error information the App Store server records when it attempts to send a notification to your server.
    ///
    /// [sendAttemptResult](https://developer.apple.com/documentation/appstoreserverapi/sendattemptresult)
    public var sendAttemptResult: SendAttemptResult?

    public init(attemptDate: Int64? = nil, sendAttemptResult: SendAttemptResult? = nil) {
        self.attemptDate = attemptDate
        self.sendAttemptResult = sendAttemptResult
    }
}
