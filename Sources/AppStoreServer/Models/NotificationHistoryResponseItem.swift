/// The App Store server notification history record, including the signed notification payload and its send attempts.
///
/// [notificationHistoryResponseItem](https://developer.apple.com/documentation/appstoreserverapi/notificationhistoryresponseitem)
public struct NotificationHistoryResponseItem: Codable, Hashable, Sendable {
    /// The notification, signed, in JSON Web Signature (JWS) format: the same value the webhook receives.
    ///
    /// [signedPayload](https://developer.apple.com/documentation/appstoreservernotifications/signedpayload)
    public var signedPayload: String?

    /// The App Store server's attempts to send the notification to your server, at most six (the first one and five retries), oldest first.
    ///
    /// [sendAttemptItem](https://developer.apple.com/documentation/appstoreserverapi/sendattemptitem)
    public var sendAttempts: [SendAttemptItem]?

    public init(signedPayload: String? = nil, sendAttempts: [SendAttemptItem]? = nil) {
        self.signedPayload = signedPayload
        self.sendAttempts = sendAttempts
    }
}
