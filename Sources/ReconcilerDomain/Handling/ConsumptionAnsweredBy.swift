/// Who sent an answer to a consumption request (`consumption_answers.answered_by`, `answeredBy` in
/// `consumption list --json`).
///
/// An open set: a value a newer version writes (another sender of answers) reads back as itself
/// instead of failing the list, as Apple's open enums do.
package struct ConsumptionAnsweredBy: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    package let rawValue: String

    package init(rawValue: String) { self.rawValue = rawValue }

    /// `reconciler consumption send`, by an operator.
    package static let command = ConsumptionAnsweredBy(rawValue: "command")
    /// The configuration's `consumption` policy (`consumption respond`, or automatically).
    package static let policy = ConsumptionAnsweredBy(rawValue: "policy")
    /// The app, through the app API's `POST /v1/consumption/{transactionId}`.
    package static let app = ConsumptionAnsweredBy(rawValue: "app")

    package var description: String { rawValue }

    package init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}
