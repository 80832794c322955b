/// A response that contains the contents of the test notification sent by the App Store server and the result from your server.
///
/// [CheckTestNotificationResponse](https://developer.apple.com/documentation/appstoreserverapi/checktestnotificationresponse)
///
/// It is the response of Get Test Notification Status.
public struct CheckTestNotificationResponse: Codable, Hashable, Sendable {
    /// The TEST notification the App Store sent, signed, in JSON Web Signature (JWS) format.
    ///
    /// [signedPayload](https://developer.apple.com/documentation/appstoreservernotifications/signedpayload)
    public var signedPayload: String?

    /// The App Store server's attempts to send the TEST notification to your server, at most six.
    ///
    /// [sendAttemptItem](https://developer.apple.com/documentation/appstoreserverapi/sendattemptitem)
    ///
    /// It is empty while the first attempt is under way.
    public var sendAttempts: [SendAttemptItem]?

    public init(signedPayload: String? = nil, sendAttempts: [SendAttemptItem]? = nil) {
        self.signedPayload = signedPayload
        self.sendAttempts = sendAttempts
    }
}
