/// The request body of Send Consumption Information (V2): the app's answer to a
/// `CONSUMPTION_REQUEST` notification.
///
/// [ConsumptionRequest](https://developer.apple.com/documentation/appstoreserverapi/consumptionrequest)
///
/// Apple rejects with a 400: `customerConsented` other than `true` (4000035); a `deliveryStatus`,
/// `refundPreference` or `sampleContentProvided` it does not know (4000036, 4000044, 4000041); a
/// `consumptionPercentage` outside 0...100000 (ConsumptionPercentageOutOfRangeError), other than 0
/// when `deliveryStatus` is not `DELIVERED` (UndeliveredConsumptionPercentageNonZeroError), or given
/// at all for an auto-renewable subscription (4000209, Apple computes it). With `GRANT_PRORATED`, a
/// consumable, non-consumable or non-renewing purchase needs a percentage greater than 0 and less
/// than 100000.
///
/// ```swift
/// let answer = ConsumptionRequest(customerConsented: true, deliveryStatus: .delivered, sampleContentProvided: false,
///                                 consumptionPercentage: 25_000, refundPreference: .grantProrated)
/// ```
public struct ConsumptionRequest: Codable, Hashable, Sendable {
    /// Whether the customer consented to share consumption data with the App Store; Apple accepts only `true`.
    ///
    /// [customerConsented](https://developer.apple.com/documentation/appstoreserverapi/customerconsented)
    public var customerConsented: Bool

    /// The share of the purchase the customer consumed, in milliunits (100000 is all of it).
    ///
    /// [consumptionPercentage](https://developer.apple.com/documentation/appstoreserverapi/consumptionpercentage)
    public var consumptionPercentage: Int32?

    /// Whether the app delivered the purchase and it works properly.
    ///
    /// [deliveryStatus](https://developer.apple.com/documentation/appstoreserverapi/deliverystatus)
    public var deliveryStatus: DeliveryStatus

    /// The app's preferred outcome for the refund request.
    ///
    /// [refundPreference](https://developer.apple.com/documentation/appstoreserverapi/refundpreference)
    public var refundPreference: RefundPreference?

    /// Whether the app provided, before the purchase, a free sample or trial of the content, or
    /// information about its functionality.
    ///
    /// [sampleContentProvided](https://developer.apple.com/documentation/appstoreserverapi/samplecontentprovided)
    public var sampleContentProvided: Bool

    public init(
        customerConsented: Bool, deliveryStatus: DeliveryStatus, sampleContentProvided: Bool, consumptionPercentage: Int32? = nil,
        refundPreference: RefundPreference? = nil
    ) {
        self.customerConsented = customerConsented
        self.consumptionPercentage = consumptionPercentage
        self.deliveryStatus = deliveryStatus
        self.refundPreference = refundPreference
        self.sampleContentProvided = sampleContentProvided
    }
}
