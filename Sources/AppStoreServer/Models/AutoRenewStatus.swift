/// The renewal status for an auto-renewable subscription.
///
/// [autoRenewStatus](https://developer.apple.com/documentation/appstoreserverapi/autorenewstatus)
///
/// Values Apple adds later decode without error and keep their raw value.
public struct AutoRenewStatus: AppleEnumeration {
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// Automatic renewal is off: the subscription won't renew at the end of the current period (`0`).
    public static let off = AutoRenewStatus(rawValue: 0)
    /// Automatic renewal is on: the subscription renews at the end of the current period (`1`).
    public static let on = AutoRenewStatus(rawValue: 1)

    public static let knownValues: [AutoRenewStatus] = [.off, .on]
}
