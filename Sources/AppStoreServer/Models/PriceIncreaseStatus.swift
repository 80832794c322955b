/// The status that indicates whether an auto-renewable subscription is subject to a price increase.
///
/// [priceIncreaseStatus](https://developer.apple.com/documentation/appstoreserverapi/priceincreasestatus)
///
/// Values Apple adds later decode without error and keep their raw value.
public struct PriceIncreaseStatus: AppleEnumeration {
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// The customer hasn't responded yet to a price increase that requires their consent (`0`).
    public static let customerHasNotResponded = PriceIncreaseStatus(rawValue: 0)
    /// The customer consented to the price increase, or was notified of one that doesn't require consent (`1`).
    public static let customerConsentedOrWasNotifiedWithoutNeedingConsent = PriceIncreaseStatus(rawValue: 1)

    public static let knownValues: [PriceIncreaseStatus] = [.customerHasNotResponded, .customerConsentedOrWasNotifiedWithoutNeedingConsent]
}
