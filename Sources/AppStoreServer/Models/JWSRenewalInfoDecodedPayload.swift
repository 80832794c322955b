/// A decoded signed renewal info (`signedRenewalInfo`) of an auto-renewable subscription.
///
/// It has no `bundleId`: verifiers can only check its environment. Dates are UNIX milliseconds.
public struct JWSRenewalInfoDecodedPayload: Codable, Hashable, Sendable {
    public var expirationIntent: ExpirationIntent?
    public var originalTransactionId: String?
    public var autoRenewProductId: String?
    public var productId: String?
    public var autoRenewStatus: AutoRenewStatus?
    public var isInBillingRetryPeriod: Bool?
    public var priceIncreaseStatus: PriceIncreaseStatus?
    public var gracePeriodExpiresDate: Int64?
    public var offerType: OfferType?
    public var offerIdentifier: String?
    /// The UNIX time, in milliseconds, that the App Store signed this renewal info.
    public var signedDate: Int64?
    public var environment: AppStoreEnvironment?
    public var recentSubscriptionStartDate: Int64?
    public var renewalDate: Int64?
    /// The currency of ``renewalPrice``.
    public var currency: String?
    /// The price of the next renewal, in milliunits of ``currency``.
    public var renewalPrice: Int64?
    public var offerDiscountType: OfferDiscountType?
    public var eligibleWinBackOfferIds: [String]?
    public var appAccountToken: String?
    public var appTransactionId: String?
    public var offerPeriod: String?
    /// Advanced Commerce API data, kept as Apple sent it.
    public var advancedCommerceInfo: RawJSON?
    public var commitmentInfo: RenewalCommitmentInfo?
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
