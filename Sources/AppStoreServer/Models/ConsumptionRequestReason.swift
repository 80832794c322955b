/// The customer-provided reason for a refund request.
///
/// Values Apple adds later decode without error and keep their raw value.
public struct ConsumptionRequestReason: AppleEnumeration {
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    public static let unintendedPurchase = ConsumptionRequestReason(rawValue: "UNINTENDED_PURCHASE")
    public static let fulfillmentIssue = ConsumptionRequestReason(rawValue: "FULFILLMENT_ISSUE")
    public static let unsatisfiedWithPurchase = ConsumptionRequestReason(rawValue: "UNSATISFIED_WITH_PURCHASE")
    public static let legal = ConsumptionRequestReason(rawValue: "LEGAL")
    public static let other = ConsumptionRequestReason(rawValue: "OTHER")

    public static let knownValues: [ConsumptionRequestReason] = [.unintendedPurchase, .fulfillmentIssue, .unsatisfiedWithPurchase, .legal, .other]
}
