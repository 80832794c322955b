/// Apple's deadline for an answer to a `CONSUMPTION_REQUEST` (Send Consumption Information):
/// "Respond within 12 hours of receiving the CONSUMPTION_REQUEST notification". A request
/// recovered after an outage is due 12 hours after Apple first tried to send it; Apple's own retries
/// (1 hour, then 12 more) come too late for it.
package enum ConsumptionRequestDeadline {
    /// How long after the first send attempt an answer is due, ms.
    package static let answerWithin: Int64 = 12 * 3_600_000

    /// Where a request stands at `now` (UNIX ms): answered, open (before its deadline) or expired.
    package static func state(respondBy: Int64, answered: Bool, at now: Int64) -> State {
        if answered { return .answered }
        return now < respondBy ? .open : .expired
    }

    /// Where a request stands.
    package enum State: String, Sendable, Codable, CaseIterable {
        /// An answer was sent and Apple accepted it.
        case answered
        /// No answer yet, and the deadline has not passed.
        case open
        /// No answer, and the deadline passed.
        case expired
    }
}
