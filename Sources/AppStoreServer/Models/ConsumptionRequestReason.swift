/// The customer-provided reason for a refund request.
///
/// [consumptionRequestReason](https://developer.apple.com/documentation/appstoreservernotifications/consumptionrequestreason)
///
/// Values Apple adds later decode without error and keep their raw value.
public struct ConsumptionRequestReason: AppleEnumeration {
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    /// The customer didn't intend to make the purchase (`UNINTENDED_PURCHASE`).
    public static let unintendedPurchase = ConsumptionRequestReason(rawValue: "UNINTENDED_PURCHASE")
    /// The customer had an issue receiving or using the purchase (`FULFILLMENT_ISSUE`).
    public static let fulfillmentIssue = ConsumptionRequestReason(rawValue: "FULFILLMENT_ISSUE")
    /// The customer wasn't satisfied with the purchase (`UNSATISFIED_WITH_PURCHASE`).
    public static let unsatisfiedWithPurchase = ConsumptionRequestReason(rawValue: "UNSATISFIED_WITH_PURCHASE")
    /// The customer requested the refund for a legal reason (`LEGAL`).
    public static let legal = ConsumptionRequestReason(rawValue: "LEGAL")
    /// The customer requested the refund for another reason (`OTHER`).
    public static let other = ConsumptionRequestReason(rawValue: "OTHER")

    public static let knownValues: [ConsumptionRequestReason] = [.unintendedPurchase, .fulfillmentIssue, .unsatisfiedWithPurchase, .legal, .other]
}
