/// Whether the app delivered an In-App Purchase that works properly, in a ``ConsumptionRequest``.
///
/// [deliveryStatus](https://developer.apple.com/documentation/appstoreserverapi/deliverystatus)
///
/// Values Apple adds later decode without error and keep their raw value.
public struct DeliveryStatus: AppleEnumeration {
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    /// The app delivered the purchase and it works properly (`DELIVERED`).
    public static let delivered = DeliveryStatus(rawValue: "DELIVERED")
    /// Not delivered because of a quality issue (`UNDELIVERED_QUALITY_ISSUE`).
    public static let undeliveredQualityIssue = DeliveryStatus(rawValue: "UNDELIVERED_QUALITY_ISSUE")
    /// The app delivered the wrong item (`UNDELIVERED_WRONG_ITEM`).
    public static let undeliveredWrongItem = DeliveryStatus(rawValue: "UNDELIVERED_WRONG_ITEM")
    /// Not delivered because of a server outage (`UNDELIVERED_SERVER_OUTAGE`).
    public static let undeliveredServerOutage = DeliveryStatus(rawValue: "UNDELIVERED_SERVER_OUTAGE")
    /// Not delivered for another reason (`UNDELIVERED_OTHER`).
    public static let undeliveredOther = DeliveryStatus(rawValue: "UNDELIVERED_OTHER")

    public static let knownValues: [DeliveryStatus] = [
        .delivered, .undeliveredQualityIssue, .undeliveredWrongItem, .undeliveredServerOutage, .undeliveredOther,
    ]
}
