/// The type that describes the in-app purchase or external purchase event for which the App Store sends a version 2 notification.
///
/// Values Apple adds later decode without error and keep their raw value.
public struct NotificationTypeV2: AppleEnumeration {
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    public static let consumptionRequest = NotificationTypeV2(rawValue: "CONSUMPTION_REQUEST")
    public static let didChangeRenewalPref = NotificationTypeV2(rawValue: "DID_CHANGE_RENEWAL_PREF")
    public static let didChangeRenewalStatus = NotificationTypeV2(rawValue: "DID_CHANGE_RENEWAL_STATUS")
    public static let didFailToRenew = NotificationTypeV2(rawValue: "DID_FAIL_TO_RENEW")
    public static let didRenew = NotificationTypeV2(rawValue: "DID_RENEW")
    public static let expired = NotificationTypeV2(rawValue: "EXPIRED")
    public static let externalPurchaseToken = NotificationTypeV2(rawValue: "EXTERNAL_PURCHASE_TOKEN")
    public static let gracePeriodExpired = NotificationTypeV2(rawValue: "GRACE_PERIOD_EXPIRED")
    public static let metadataUpdate = NotificationTypeV2(rawValue: "METADATA_UPDATE")
    public static let migration = NotificationTypeV2(rawValue: "MIGRATION")
    public static let offerRedeemed = NotificationTypeV2(rawValue: "OFFER_REDEEMED")
    public static let oneTimeCharge = NotificationTypeV2(rawValue: "ONE_TIME_CHARGE")
    public static let priceChange = NotificationTypeV2(rawValue: "PRICE_CHANGE")
    public static let priceIncrease = NotificationTypeV2(rawValue: "PRICE_INCREASE")
    public static let refund = NotificationTypeV2(rawValue: "REFUND")
    public static let refundDeclined = NotificationTypeV2(rawValue: "REFUND_DECLINED")
    public static let refundReversed = NotificationTypeV2(rawValue: "REFUND_REVERSED")
    public static let renewalExtended = NotificationTypeV2(rawValue: "RENEWAL_EXTENDED")
    public static let renewalExtension = NotificationTypeV2(rawValue: "RENEWAL_EXTENSION")
    public static let rescindConsent = NotificationTypeV2(rawValue: "RESCIND_CONSENT")
    public static let revoke = NotificationTypeV2(rawValue: "REVOKE")
    public static let subscribed = NotificationTypeV2(rawValue: "SUBSCRIBED")
    public static let test = NotificationTypeV2(rawValue: "TEST")

    public static let knownValues: [NotificationTypeV2] = [.consumptionRequest, .didChangeRenewalPref, .didChangeRenewalStatus, .didFailToRenew, .didRenew, .expired, .externalPurchaseToken, .gracePeriodExpired, .metadataUpdate, .migration, .offerRedeemed, .oneTimeCharge, .priceChange, .priceIncrease, .refund, .refundDeclined, .refundReversed, .renewalExtended, .renewalExtension, .rescindConsent, .revoke, .subscribed, .test]
}
