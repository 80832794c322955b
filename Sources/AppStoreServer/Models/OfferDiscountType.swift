/// The payment mode for a discount offer on an In-App Purchase.
///
/// [offerDiscountType](https://developer.apple.com/documentation/appstoreserverapi/offerdiscounttype)
///
/// Values Apple adds later decode without error and keep their raw value.
public struct OfferDiscountType: AppleEnumeration {
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    /// A free trial (`FREE_TRIAL`).
    public static let freeTrial = OfferDiscountType(rawValue: "FREE_TRIAL")
    /// The customer pays a discounted price over one or more billing periods (`PAY_AS_YOU_GO`).
    public static let payAsYouGo = OfferDiscountType(rawValue: "PAY_AS_YOU_GO")
    /// The customer pays a discounted price once, up front, for the offer's duration (`PAY_UP_FRONT`).
    public static let payUpFront = OfferDiscountType(rawValue: "PAY_UP_FRONT")
    /// A discount on a consumable, non-consumable or non-renewing subscription (`ONE_TIME`).
    public static let oneTime = OfferDiscountType(rawValue: "ONE_TIME")

    public static let knownValues: [OfferDiscountType] = [.freeTrial, .payAsYouGo, .payUpFront, .oneTime]
}
