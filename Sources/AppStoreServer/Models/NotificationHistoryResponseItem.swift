/// A notification the App Store sent (or tried to send) to your server, with its send attempts.
public struct NotificationHistoryResponseItem: Codable, Hashable, Sendable {
    /// The original notification's JWS, the same value the webhook receives.
    public var signedPayload: String?
    /// Up to six attempts (the first one and five retries), oldest first.
    public var sendAttempts: [SendAttemptItem]?

    public init(signedPayload: String? = nil, sendAttempts: [SendAttemptItem]? = nil) {
        self.signedPayload = signedPayload
        self.sendAttempts = sendAttempts
    }
}
