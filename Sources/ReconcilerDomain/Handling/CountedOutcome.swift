/// What a run counts a notification as (`run_counts.outcome`): how the handler took it, or
/// `rejected` when it was refused (quarantined) before reaching the handler.
package enum CountedOutcome: Hashable, Sendable, RawRepresentable, CaseIterable {
    case handled(HandlingResult.Outcome)
    case rejected

    package static var allCases: [CountedOutcome] { HandlingResult.Outcome.allCases.map(Self.handled) + [.rejected] }

    package init?(rawValue: String) {
        if rawValue == "rejected" {
            self = .rejected
        } else if let outcome = HandlingResult.Outcome(rawValue: rawValue) {
            self = .handled(outcome)
        } else {
            return nil
        }
    }

    package var rawValue: String {
        switch self {
        case .handled(let outcome): outcome.rawValue
        case .rejected: "rejected"
        }
    }
}
