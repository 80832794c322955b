/// A value that indicates whether the order ID in the request is valid for your app.
///
/// [OrderLookupStatus](https://developer.apple.com/documentation/appstoreserverapi/orderlookupstatus)
///
/// Values Apple adds later decode without error and keep their raw value.
public struct OrderLookupStatus: AppleEnumeration {
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// The order ID is valid and holds at least one in-app purchase of this app (`0`).
    public static let valid = OrderLookupStatus(rawValue: 0)
    /// The order ID is invalid, or holds no in-app purchase of this app (`1`).
    public static let invalid = OrderLookupStatus(rawValue: 1)

    public static let knownValues: [OrderLookupStatus] = [.valid, .invalid]
}
