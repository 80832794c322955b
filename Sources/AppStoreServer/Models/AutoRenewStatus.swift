/// The renewal status for an auto-renewable subscription.
///
/// Values Apple adds later decode without error and keep their raw value.
public struct AutoRenewStatus: AppleEnumeration {
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }

    public static let off = AutoRenewStatus(rawValue: 0)
    public static let on = AutoRenewStatus(rawValue: 1)

    public static let knownValues: [AutoRenewStatus] = [.off, .on]
}
