/// The date and result of one attempt to send a notification to your server.
public struct SendAttemptItem: Codable, Hashable, Sendable {
    /// The UNIX time, in milliseconds, of the attempt.
    public var attemptDate: Int64?
    public var sendAttemptResult: SendAttemptResult?

    public init(attemptDate: Int64? = nil, sendAttemptResult: SendAttemptResult? = nil) {
        self.attemptDate = attemptDate
        self.sendAttemptResult = sendAttemptResult
    }
}
