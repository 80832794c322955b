/// The status of an auto-renewable subscription.
///
/// Values Apple adds later decode without error and keep their raw value.
public struct Status: AppleEnumeration {
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }

    public static let active = Status(rawValue: 1)
    public static let expired = Status(rawValue: 2)
    public static let billingRetry = Status(rawValue: 3)
    public static let billingGracePeriod = Status(rawValue: 4)
    public static let revoked = Status(rawValue: 5)

    public static let knownValues: [Status] = [.active, .expired, .billingRetry, .billingGracePeriod, .revoked]
}
