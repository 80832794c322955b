import AppStoreServer
package import ReconcilerShared

/// Apple's deadline for an answer to a `CONSUMPTION_REQUEST` (Send Consumption Information):
/// "Respond within 12 hours of receiving the CONSUMPTION_REQUEST notification". A request
/// recovered after an outage is due 12 hours after Apple first tried to send it; Apple's own retries
/// (1 hour, then 12 more) come too late for it.
package enum ConsumptionRequestDeadline {
    /// How long after the first send attempt an answer is due.
    package static let answerWithin: Duration = NotificationRules.rule(for: .consumptionRequest).answerWithin ?? .hours(12)

    /// Where a request stands at `now`: answered, acked, open (before its deadline) or expired.
    /// An answer Apple accepted comes first: an ack after it adds only who said so.
    package static func state(respondBy: Timestamp, answered: Bool, acked: Bool = false, at now: Timestamp) -> State {
        if answered { return .answered }
        if acked { return .acked }
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
        /// Needs nothing more from the reconciler (`reconciler consumption ack`): the app answered
        /// it itself, or it is deliberately not answered.
        case acked
    }
}
