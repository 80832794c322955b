/// Additional information that identifies the notification event, present only for some notification types.
///
/// Values Apple adds later decode without error and keep their raw value.
public struct Subtype: AppleEnumeration {
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    public static let accepted = Subtype(rawValue: "ACCEPTED")
    public static let activeTokenReminder = Subtype(rawValue: "ACTIVE_TOKEN_REMINDER")
    public static let autoRenewDisabled = Subtype(rawValue: "AUTO_RENEW_DISABLED")
    public static let autoRenewEnabled = Subtype(rawValue: "AUTO_RENEW_ENABLED")
    public static let billingRecovery = Subtype(rawValue: "BILLING_RECOVERY")
    public static let billingRetry = Subtype(rawValue: "BILLING_RETRY")
    public static let created = Subtype(rawValue: "CREATED")
    public static let downgrade = Subtype(rawValue: "DOWNGRADE")
    public static let failure = Subtype(rawValue: "FAILURE")
    public static let gracePeriod = Subtype(rawValue: "GRACE_PERIOD")
    public static let initialBuy = Subtype(rawValue: "INITIAL_BUY")
    public static let pending = Subtype(rawValue: "PENDING")
    public static let priceIncrease = Subtype(rawValue: "PRICE_INCREASE")
    public static let productNotForSale = Subtype(rawValue: "PRODUCT_NOT_FOR_SALE")
    public static let resubscribe = Subtype(rawValue: "RESUBSCRIBE")
    public static let summary = Subtype(rawValue: "SUMMARY")
    public static let unreported = Subtype(rawValue: "UNREPORTED")
    public static let upgrade = Subtype(rawValue: "UPGRADE")
    public static let voluntary = Subtype(rawValue: "VOLUNTARY")

    public static let knownValues: [Subtype] = [.accepted, .activeTokenReminder, .autoRenewDisabled, .autoRenewEnabled, .billingRecovery, .billingRetry, .created, .downgrade, .failure, .gracePeriod, .initialBuy, .pending, .priceIncrease, .productNotForSale, .resubscribe, .summary, .unreported, .upgrade, .voluntary]
}
