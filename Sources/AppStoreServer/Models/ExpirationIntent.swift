/// The reason an auto-renewable subscription expired.
///
/// Values Apple adds later decode without error and keep their raw value.
public struct ExpirationIntent: AppleEnumeration {
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }

    public static let customerCancelled = ExpirationIntent(rawValue: 1)
    public static let billingError = ExpirationIntent(rawValue: 2)
    public static let customerDidNotConsentToPriceIncrease = ExpirationIntent(rawValue: 3)
    public static let productNotAvailable = ExpirationIntent(rawValue: 4)
    public static let other = ExpirationIntent(rawValue: 5)

    public static let knownValues: [ExpirationIntent] = [.customerCancelled, .billingError, .customerDidNotConsentToPriceIncrease, .productNotAvailable, .other]
}
