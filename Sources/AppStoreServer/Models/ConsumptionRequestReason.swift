/// The customer-provided reason for a refund request.
///
/// Values Apple adds later decode without error and keep their raw value, so code can log
/// and store them; compare against the static members for the known ones.
public struct ConsumptionRequestReason: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    public static let unintendedPurchase = ConsumptionRequestReason(rawValue: "UNINTENDED_PURCHASE")
    public static let fulfillmentIssue = ConsumptionRequestReason(rawValue: "FULFILLMENT_ISSUE")
    public static let unsatisfiedWithPurchase = ConsumptionRequestReason(rawValue: "UNSATISFIED_WITH_PURCHASE")
    public static let legal = ConsumptionRequestReason(rawValue: "LEGAL")
    public static let other = ConsumptionRequestReason(rawValue: "OTHER")

    /// The values documented by Apple when this code was written.
    public static let knownValues: [ConsumptionRequestReason] = [.unintendedPurchase, .fulfillmentIssue, .unsatisfiedWithPurchase, .legal, .other]

    /// Whether Apple documented this value when this code was written.
    public var isKnown: Bool { Self.knownValues.contains(self) }

    public var description: String { rawValue }
}
