/// A string that provides details about select notification types in version 2.
///
/// [subtype](https://developer.apple.com/documentation/appstoreservernotifications/subtype)
///
/// It is present only for some notification types.
/// Values Apple adds later decode without error and keep their raw value.
public struct Subtype: AppleEnumeration {
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    /// With PRICE_INCREASE: the customer consented to the price increase, or it needed no consent (`ACCEPTED`).
    public static let accepted = Subtype(rawValue: "ACCEPTED")
    /// With EXTERNAL_PURCHASE_TOKEN: a reminder about a token that is still active (`ACTIVE_TOKEN_REMINDER`).
    public static let activeTokenReminder = Subtype(rawValue: "ACTIVE_TOKEN_REMINDER")
    /// With DID_CHANGE_RENEWAL_STATUS: automatic renewal was turned off (`AUTO_RENEW_DISABLED`).
    public static let autoRenewDisabled = Subtype(rawValue: "AUTO_RENEW_DISABLED")
    /// With DID_CHANGE_RENEWAL_STATUS: automatic renewal was turned on (`AUTO_RENEW_ENABLED`).
    public static let autoRenewEnabled = Subtype(rawValue: "AUTO_RENEW_ENABLED")
    /// With DID_RENEW: a subscription that failed to renew renewed after a billing retry (`BILLING_RECOVERY`).
    public static let billingRecovery = Subtype(rawValue: "BILLING_RECOVERY")
    /// With EXPIRED: the subscription expired after the billing retry period ended without a renewal (`BILLING_RETRY`).
    public static let billingRetry = Subtype(rawValue: "BILLING_RETRY")
    /// With EXTERNAL_PURCHASE_TOKEN: the system created a token (`CREATED`).
    public static let created = Subtype(rawValue: "CREATED")
    /// With DID_CHANGE_RENEWAL_PREF or OFFER_REDEEMED: a downgrade that takes effect at the next renewal (`DOWNGRADE`).
    public static let downgrade = Subtype(rawValue: "DOWNGRADE")
    /// With RENEWAL_EXTENSION: the renewal-date extension failed for one subscription (`FAILURE`).
    public static let failure = Subtype(rawValue: "FAILURE")
    /// With DID_FAIL_TO_RENEW: the subscription is in a billing grace period; keep providing service (`GRACE_PERIOD`).
    public static let gracePeriod = Subtype(rawValue: "GRACE_PERIOD")
    /// With SUBSCRIBED: the customer subscribed to the subscription group for the first time (`INITIAL_BUY`).
    public static let initialBuy = Subtype(rawValue: "INITIAL_BUY")
    /// With PRICE_INCREASE: the customer hasn't responded to a price increase that requires consent (`PENDING`).
    public static let pending = Subtype(rawValue: "PENDING")
    /// With EXPIRED: the subscription expired because the customer didn't consent to a price increase (`PRICE_INCREASE`).
    public static let priceIncrease = Subtype(rawValue: "PRICE_INCREASE")
    /// With EXPIRED: the product wasn't for sale when the subscription tried to renew (`PRODUCT_NOT_FOR_SALE`).
    public static let productNotForSale = Subtype(rawValue: "PRODUCT_NOT_FOR_SALE")
    /// With SUBSCRIBED: the customer resubscribed to the subscription group (`RESUBSCRIBE`).
    public static let resubscribe = Subtype(rawValue: "RESUBSCRIBE")
    /// With RENEWAL_EXTENSION: the extension for all eligible subscribers finished; the payload is `summary` (`SUMMARY`).
    public static let summary = Subtype(rawValue: "SUMMARY")
    /// With EXTERNAL_PURCHASE_TOKEN: a token that was created but not reported (`UNREPORTED`).
    public static let unreported = Subtype(rawValue: "UNREPORTED")
    /// With DID_CHANGE_RENEWAL_PREF or OFFER_REDEEMED: an upgrade that takes effect immediately (`UPGRADE`).
    public static let upgrade = Subtype(rawValue: "UPGRADE")
    /// With EXPIRED: the subscription expired after the customer turned off automatic renewal (`VOLUNTARY`).
    public static let voluntary = Subtype(rawValue: "VOLUNTARY")

    public static let knownValues: [Subtype] = [
        .accepted, .activeTokenReminder, .autoRenewDisabled, .autoRenewEnabled, .billingRecovery, .billingRetry, .created, .downgrade, .failure,
        .gracePeriod, .initialBuy, .pending, .priceIncrease, .productNotForSale, .resubscribe, .summary, .unreported, .upgrade, .voluntary,
    ]
}
