/// The app's preferred outcome for a refund request, in a ``ConsumptionRequest``.
///
/// [refundPreference](https://developer.apple.com/documentation/appstoreserverapi/refundpreference)
///
/// Values Apple adds later decode without error and keep their raw value.
public struct RefundPreference: AppleEnumeration {
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    /// The app prefers that the App Store declines the refund (`DECLINE`).
    public static let decline = RefundPreference(rawValue: "DECLINE")
    /// The app prefers that the App Store grants a full refund (`GRANT_FULL`).
    public static let grantFull = RefundPreference(rawValue: "GRANT_FULL")
    /// The app prefers that the App Store grants a prorated refund (`GRANT_PRORATED`).
    public static let grantProrated = RefundPreference(rawValue: "GRANT_PRORATED")

    public static let knownValues: [RefundPreference] = [.decline, .grantFull, .grantProrated]
}
