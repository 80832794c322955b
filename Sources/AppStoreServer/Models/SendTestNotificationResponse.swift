/// A response that contains the test notification token.
///
/// [SendTestNotificationResponse](https://developer.apple.com/documentation/appstoreserverapi/sendtestnotificationresponse)
///
/// It is the response of Request a Test Notification.
public struct SendTestNotificationResponse: Codable, Hashable, Sendable {
    /// A unique identifier for a notification test that the App Store server sends to your server.
    ///
    /// [testNotificationToken](https://developer.apple.com/documentation/appstoreserverapi/testnotificationtoken)
    ///
    /// Pass it to Get Test Notification Status.
    public var testNotificationToken: String?

    public init(testNotificationToken: String? = nil) {
        self.testNotificationToken = testNotificationToken
    }
}
