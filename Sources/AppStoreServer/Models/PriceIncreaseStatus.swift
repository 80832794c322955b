/// The status that indicates whether an auto-renewable subscription is subject to a price increase.
///
/// Values Apple adds later decode without error and keep their raw value.
public struct PriceIncreaseStatus: AppleEnumeration {
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }

    public static let customerHasNotResponded = PriceIncreaseStatus(rawValue: 0)
    public static let customerConsentedOrWasNotifiedWithoutNeedingConsent = PriceIncreaseStatus(rawValue: 1)

    public static let knownValues: [PriceIncreaseStatus] = [.customerHasNotResponded, .customerConsentedOrWasNotifiedWithoutNeedingConsent]
}
