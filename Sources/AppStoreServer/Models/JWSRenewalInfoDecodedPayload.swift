/// A decoded payload containing subscription renewal information for an auto-renewable subscription.
///
/// [JWSRenewalInfoDecodedPayload](https://developer.apple.com/documentation/appstoreserverapi/jwsrenewalinfodecodedpayload)
///
/// It is the payload of a `signedRenewalInfo`. It has no `bundleId`: verifiers can only check its
/// environment. Dates are UNIX milliseconds.
public struct JWSRenewalInfoDecodedPayload: Codable, Hashable, Sendable {
    /// The reason the subscription expired.
    ///
    /// [expirationIntent](https://developer.apple.com/documentation/appstoreserverapi/expirationintent)
    public var expirationIntent: ExpirationIntent?

    /// The original transaction identifier of a purchase.
    ///
    /// [originalTransactionId](https://developer.apple.com/documentation/appstoreserverapi/originaltransactionid)
    public var originalTransactionId: String?

    /// The product identifier of the product that will renew at the next billing period.
    ///
    /// [autoRenewProductId](https://developer.apple.com/documentation/appstoreserverapi/autorenewproductid)
    public var autoRenewProductId: String?

    /// The unique identifier for the product, that you create in App Store Connect.
    ///
    /// [productId](https://developer.apple.com/documentation/appstoreserverapi/productid)
    public var productId: String?

    /// The renewal status of the auto-renewable subscription.
    ///
    /// [autoRenewStatus](https://developer.apple.com/documentation/appstoreserverapi/autorenewstatus)
    public var autoRenewStatus: AutoRenewStatus?

    /// A Boolean value that indicates whether the App Store is attempting to automatically renew an expired subscription.
    ///
    /// [isInBillingRetryPeriod](https://developer.apple.com/documentation/appstoreserverapi/isinbillingretryperiod)
    public var isInBillingRetryPeriod: Bool?

    /// The status that indicates whether the auto-renewable subscription is subject to a price increase.
    ///
    /// [priceIncreaseStatus](https://developer.apple.com/documentation/appstoreserverapi/priceincreasestatus)
    public var priceIncreaseStatus: PriceIncreaseStatus?

    /// The UNIX time, in milliseconds, when the billing grace period for subscription renewals expires.
    ///
    /// [gracePeriodExpiresDate](https://developer.apple.com/documentation/appstoreserverapi/graceperiodexpiresdate)
    public var gracePeriodExpiresDate: Int64?

    /// The type of subscription offer.
    ///
    /// [offerType](https://developer.apple.com/documentation/appstoreserverapi/offertype)
    public var offerType: OfferType?

    /// The offer code or the promotional offer identifier.
    ///
    /// [offerIdentifier](https://developer.apple.com/documentation/appstoreserverapi/offeridentifier)
    public var offerIdentifier: String?

    /// The UNIX time, in milliseconds, that the App Store signed the JSON Web Signature data.
    ///
    /// [signedDate](https://developer.apple.com/documentation/appstoreserverapi/signeddate)
    public var signedDate: Int64?

    /// The server environment, either sandbox or production.
    ///
    /// [environment](https://developer.apple.com/documentation/appstoreserverapi/environment)
    public var environment: AppStoreEnvironment?

    /// The earliest start date of a subscription in a series of purchases, ignoring lapses of paid service shorter than 60 days.
    ///
    /// [recentSubscriptionStartDate](https://developer.apple.com/documentation/appstoreserverapi/recentsubscriptionstartdate)
    public var recentSubscriptionStartDate: Int64?

    /// The UNIX time, in milliseconds, when the most recent auto-renewable subscription purchase expires.
    ///
    /// [renewalDate](https://developer.apple.com/documentation/appstoreserverapi/renewaldate)
    public var renewalDate: Int64?

    /// The currency code for the ``renewalPrice`` of the subscription.
    ///
    /// [currency](https://developer.apple.com/documentation/appstoreserverapi/currency)
    public var currency: String?

    /// The renewal price, in milliunits of ``currency``, of the auto-renewable subscription that renews at the next billing period.
    ///
    /// [renewalPrice](https://developer.apple.com/documentation/appstoreserverapi/renewalprice)
    public var renewalPrice: Int64?

    /// The payment mode you configure for the offer.
    ///
    /// [offerDiscountType](https://developer.apple.com/documentation/appstoreserverapi/offerdiscounttype)
    public var offerDiscountType: OfferDiscountType?

    /// The win-back offer identifiers that the customer is eligible to redeem, the better offers first.
    ///
    /// [eligibleWinBackOfferIds](https://developer.apple.com/documentation/appstoreserverapi/eligiblewinbackofferids)
    public var eligibleWinBackOfferIds: [String]?

    /// The UUID that an app optionally generates to map a customer's in-app purchase with its resulting App Store transaction.
    ///
    /// [appAccountToken](https://developer.apple.com/documentation/appstoreserverapi/appaccounttoken)
    public var appAccountToken: String?

    /// The unique identifier of the app download transaction.
    ///
    /// [appTransactionId](https://developer.apple.com/documentation/appstoreserverapi/apptransactionid)
    public var appTransactionId: String?

    /// The duration of the offer.
    ///
    /// [offerPeriod](https://developer.apple.com/documentation/appstoreserverapi/offerperiod)
    public var offerPeriod: String?

    /// Renewal information that is present only for Advanced Commerce SKUs, kept as Apple sent it.
    ///
    /// [advancedCommerceRenewalInfo](https://developer.apple.com/documentation/appstoreserverapi/advancedcommercerenewalinfo)
    public var advancedCommerceInfo: RawJSON?

    /// What happens when the subscription's commitment ends; present only for subscriptions with a commitment.
    ///
    /// [RenewalCommitmentInfo](https://developer.apple.com/documentation/appstoreserverapi/renewalcommitmentinfo)
    public var commitmentInfo: RenewalCommitmentInfo?

    /// How the next renewal is billed.
    ///
    /// [renewalBillingPlanType](https://developer.apple.com/documentation/appstoreserverapi/renewalbillingplantype)
    public var renewalBillingPlanType: RenewalBillingPlanType?

    public init(
        expirationIntent: ExpirationIntent? = nil, originalTransactionId: String? = nil,
        autoRenewProductId: String? = nil, productId: String? = nil, autoRenewStatus: AutoRenewStatus? = nil,
        isInBillingRetryPeriod: Bool? = nil, priceIncreaseStatus: PriceIncreaseStatus? = nil,
        gracePeriodExpiresDate: Int64? = nil, offerType: OfferType? = nil, offerIdentifier: String? = nil,
        signedDate: Int64? = nil, environment: AppStoreEnvironment? = nil,
        recentSubscriptionStartDate: Int64? = nil, renewalDate: Int64? = nil, currency: String? = nil,
        renewalPrice: Int64? = nil, offerDiscountType: OfferDiscountType? = nil,
        eligibleWinBackOfferIds: [String]? = nil, appAccountToken: String? = nil,
        appTransactionId: String? = nil, offerPeriod: String? = nil, advancedCommerceInfo: RawJSON? = nil,
        commitmentInfo: RenewalCommitmentInfo? = nil, renewalBillingPlanType: RenewalBillingPlanType? = nil
    ) {
        self.expirationIntent = expirationIntent
        self.originalTransactionId = originalTransactionId
        self.autoRenewProductId = autoRenewProductId
        self.productId = productId
        self.autoRenewStatus = autoRenewStatus
        self.isInBillingRetryPeriod = isInBillingRetryPeriod
        self.priceIncreaseStatus = priceIncreaseStatus
        self.gracePeriodExpiresDate = gracePeriodExpiresDate
        self.offerType = offerType
        self.offerIdentifier = offerIdentifier
        self.signedDate = signedDate
        self.environment = environment
        self.recentSubscriptionStartDate = recentSubscriptionStartDate
        self.renewalDate = renewalDate
        self.currency = currency
        self.renewalPrice = renewalPrice
        self.offerDiscountType = offerDiscountType
        self.eligibleWinBackOfferIds = eligibleWinBackOfferIds
        self.appAccountToken = appAccountToken
        self.appTransactionId = appTransactionId
        self.offerPeriod = offerPeriod
        self.advancedCommerceInfo = advancedCommerceInfo
        self.commitmentInfo = commitmentInfo
        self.renewalBillingPlanType = renewalBillingPlanType
    }
}
