/// The response of Get Test Notification Status.
public struct CheckTestNotificationResponse: Codable, Hashable, Sendable {
    /// The TEST notification the App Store sent (JWS).
    public var signedPayload: String?
    /// The attempts to deliver it; empty while the first attempt is under way.
    public var sendAttempts: [SendAttemptItem]?

    public init(signedPayload: String? = nil, sendAttempts: [SendAttemptItem]? = nil) {
        self.signedPayload = signedPayload
        self.sendAttempts = sendAttempts
    }
}
