/// How a subscription with a commitment is billed.
///
/// [billingPlanType](https://developer.apple.com/documentation/appstoreserverapi/billingplantype)
///
/// Values Apple adds later decode without error and keep their raw value.
public struct BillingPlanType: AppleEnumeration {
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    /// The whole commitment is billed up front (`BILLED_UPFRONT`).
    public static let billedUpfront = BillingPlanType(rawValue: "BILLED_UPFRONT")
    /// The commitment is billed monthly (`MONTHLY`).
    public static let monthly = BillingPlanType(rawValue: "MONTHLY")

    public static let knownValues: [BillingPlanType] = [.billedUpfront, .monthly]
}
