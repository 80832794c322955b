/// The status of an auto-renewable subscription.
///
/// [status](https://developer.apple.com/documentation/appstoreserverapi/status)
///
/// Values Apple adds later decode without error and keep their raw value.
public struct Status: AppleEnumeration {
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// The subscription is active (`1`).
    public static let active = Status(rawValue: 1)
    /// The subscription is expired (`2`).
    public static let expired = Status(rawValue: 2)
    /// The subscription is in a billing retry period (`3`).
    public static let billingRetry = Status(rawValue: 3)
    /// The subscription is in a billing grace period (`4`).
    public static let billingGracePeriod = Status(rawValue: 4)
    /// The App Store refunded the subscription or revoked it from Family Sharing (`5`).
    public static let revoked = Status(rawValue: 5)

    public static let knownValues: [Status] = [.active, .expired, .billingRetry, .billingGracePeriod, .revoked]
}
