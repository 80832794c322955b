/// How the next renewal is billed.
///
/// [renewalBillingPlanType](https://developer.apple.com/documentation/appstoreserverapi/renewalbillingplantype)
///
/// Values Apple adds later decode without error and keep their raw value.
public struct RenewalBillingPlanType: AppleEnumeration {
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    /// The next commitment is billed up front (`BILLED_UPFRONT`).
    public static let billedUpfront = RenewalBillingPlanType(rawValue: "BILLED_UPFRONT")
    /// The next commitment is billed monthly (`MONTHLY`).
    public static let monthly = RenewalBillingPlanType(rawValue: "MONTHLY")

    public static let knownValues: [RenewalBillingPlanType] = [.billedUpfront, .monthly]
}
