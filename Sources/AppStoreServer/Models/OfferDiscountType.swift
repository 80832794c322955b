/// The payment mode for a discount offer on an In-App Purchase.
///
/// Values Apple adds later decode without error and keep their raw value.
public struct OfferDiscountType: AppleEnumeration {
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    public static let freeTrial = OfferDiscountType(rawValue: "FREE_TRIAL")
    public static let payAsYouGo = OfferDiscountType(rawValue: "PAY_AS_YOU_GO")
    public static let payUpFront = OfferDiscountType(rawValue: "PAY_UP_FRONT")
    public static let oneTime = OfferDiscountType(rawValue: "ONE_TIME")

    public static let knownValues: [OfferDiscountType] = [.freeTrial, .payAsYouGo, .payUpFront, .oneTime]
}
