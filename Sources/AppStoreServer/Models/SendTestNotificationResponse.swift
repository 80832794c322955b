/// The response of Request a Test Notification.
public struct SendTestNotificationResponse: Codable, Hashable, Sendable {
    /// The token to pass to Get Test Notification Status.
    public var testNotificationToken: String?

    public init(testNotificationToken: String? = nil) {
        self.testNotificationToken = testNotificationToken
    }
}
