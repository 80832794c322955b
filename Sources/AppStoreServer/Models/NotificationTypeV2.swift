/// The type that describes the in-app purchase or external purchase event for which the App Store sends a version 2 notification.
///
/// [notificationType](https://developer.apple.com/documentation/appstoreservernotifications/notificationtype)
///
/// Values Apple adds later decode without error and keep their raw value.
public struct NotificationTypeV2: AppleEnumeration {
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    /// The customer requested a refund and the App Store asks for consumption information (`CONSUMPTION_REQUEST`).
    public static let consumptionRequest = NotificationTypeV2(rawValue: "CONSUMPTION_REQUEST")
    /// The customer changed their subscription plan: subtype UPGRADE or DOWNGRADE, none when a downgrade is cancelled.
    public static let didChangeRenewalPref = NotificationTypeV2(rawValue: "DID_CHANGE_RENEWAL_PREF")
    /// The customer turned automatic renewal on or off: subtype AUTO_RENEW_ENABLED or AUTO_RENEW_DISABLED.
    public static let didChangeRenewalStatus = NotificationTypeV2(rawValue: "DID_CHANGE_RENEWAL_STATUS")
    /// The subscription failed to renew because of a billing issue: subtype GRACE_PERIOD during a grace period.
    public static let didFailToRenew = NotificationTypeV2(rawValue: "DID_FAIL_TO_RENEW")
    /// The subscription renewed: subtype BILLING_RECOVERY after a billing retry succeeded, none otherwise.
    public static let didRenew = NotificationTypeV2(rawValue: "DID_RENEW")
    /// The subscription expired: subtype VOLUNTARY, BILLING_RETRY, PRICE_INCREASE, PRODUCT_NOT_FOR_SALE, or none.
    public static let expired = NotificationTypeV2(rawValue: "EXPIRED")
    /// An external purchase token event: subtype CREATED, ACTIVE_TOKEN_REMINDER or UNREPORTED.
    public static let externalPurchaseToken = NotificationTypeV2(rawValue: "EXTERNAL_PURCHASE_TOKEN")
    /// The billing grace period ended without a renewal (`GRACE_PERIOD_EXPIRED`).
    public static let gracePeriodExpired = NotificationTypeV2(rawValue: "GRACE_PERIOD_EXPIRED")
    /// An Advanced Commerce API subscription's metadata changed (`METADATA_UPDATE`).
    public static let metadataUpdate = NotificationTypeV2(rawValue: "METADATA_UPDATE")
    /// A subscription moved to the Advanced Commerce API (`MIGRATION`).
    public static let migration = NotificationTypeV2(rawValue: "MIGRATION")
    /// The customer redeemed a subscription offer: subtype UPGRADE or DOWNGRADE, none for an active subscription.
    public static let offerRedeemed = NotificationTypeV2(rawValue: "OFFER_REDEEMED")
    /// The customer bought a consumable, non-consumable or non-renewing subscription, or got one through Family Sharing.
    public static let oneTimeCharge = NotificationTypeV2(rawValue: "ONE_TIME_CHARGE")
    /// An Advanced Commerce API subscription's price changed (`PRICE_CHANGE`).
    public static let priceChange = NotificationTypeV2(rawValue: "PRICE_CHANGE")
    /// A subscription price increase: subtype PENDING until the customer responds, ACCEPTED after.
    public static let priceIncrease = NotificationTypeV2(rawValue: "PRICE_INCREASE")
    /// The App Store refunded a transaction (`REFUND`).
    public static let refund = NotificationTypeV2(rawValue: "REFUND")
    /// The App Store declined a refund request (`REFUND_DECLINED`).
    public static let refundDeclined = NotificationTypeV2(rawValue: "REFUND_DECLINED")
    /// The App Store reversed a refund it had granted (`REFUND_REVERSED`).
    public static let refundReversed = NotificationTypeV2(rawValue: "REFUND_REVERSED")
    /// The App Store extended the renewal date of a subscription (`RENEWAL_EXTENDED`).
    public static let renewalExtended = NotificationTypeV2(rawValue: "RENEWAL_EXTENDED")
    /// A renewal-date extension for all eligible subscribers: subtype SUMMARY when done, FAILURE for one subscription.
    public static let renewalExtension = NotificationTypeV2(rawValue: "RENEWAL_EXTENSION")
    /// A parent or guardian withdrew consent for the app; the payload is ``ResponseBodyV2DecodedPayload/appData``.
    public static let rescindConsent = NotificationTypeV2(rawValue: "RESCIND_CONSENT")
    /// A family member lost access to a purchase through Family Sharing (`REVOKE`).
    public static let revoke = NotificationTypeV2(rawValue: "REVOKE")
    /// The customer subscribed: subtype INITIAL_BUY or RESUBSCRIBE.
    public static let subscribed = NotificationTypeV2(rawValue: "SUBSCRIBED")
    /// A test notification sent on request (Request a Test Notification).
    public static let test = NotificationTypeV2(rawValue: "TEST")

    public static let knownValues: [NotificationTypeV2] = [
        .consumptionRequest, .didChangeRenewalPref, .didChangeRenewalStatus, .didFailToRenew, .didRenew, .expired, .externalPurchaseToken,
        .gracePeriodExpired, .metadataUpdate, .migration, .offerRedeemed, .oneTimeCharge, .priceChange, .priceIncrease, .refund, .refundDeclined,
        .refundReversed, .renewalExtended, .renewalExtension, .rescindConsent, .revoke, .subscribed, .test,
    ]
}
