/// The reason an auto-renewable subscription expired.
///
/// [expirationIntent](https://developer.apple.com/documentation/appstoreserverapi/expirationintent)
///
/// Values Apple adds later decode without error and keep their raw value.
public struct ExpirationIntent: AppleEnumeration {
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// The customer cancelled their subscription (`1`).
    public static let customerCancelled = ExpirationIntent(rawValue: 1)
    /// A billing error, for example the customer's payment information is no longer valid (`2`).
    public static let billingError = ExpirationIntent(rawValue: 2)
    /// The customer didn't consent to a price increase that requires consent (`3`).
    public static let customerDidNotConsentToPriceIncrease = ExpirationIntent(rawValue: 3)
    /// The product wasn't available for purchase at the time of renewal (`4`).
    public static let productNotAvailable = ExpirationIntent(rawValue: 4)
    /// The subscription expired for some other reason (`5`).
    public static let other = ExpirationIntent(rawValue: 5)

    public static let knownValues: [ExpirationIntent] = [
        .customerCancelled, .billingError, .customerDidNotConsentToPriceIncrease, .productNotAvailable, .other,
    ]
}
