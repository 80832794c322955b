/// A decoded signed transaction (`signedTransactionInfo`, or an entry of `signedTransactions`).
///
/// All dates are UNIX times in milliseconds. Prices are in milliunits of ``currency``.
public struct JWSTransactionDecodedPayload: Codable, Hashable, Sendable {
    public var originalTransactionId: String?
    public var transactionId: String?
    public var webOrderLineItemId: String?
    public var bundleId: String?
    public var productId: String?
    public var subscriptionGroupIdentifier: String?
    public var purchaseDate: Int64?
    public var originalPurchaseDate: Int64?
    public var expiresDate: Int64?
    public var quantity: Int32?
    /// The type of the in-app purchase (Apple's field name is `type`).
    public var type: ProductType?
    public var appAccountToken: String?
    public var inAppOwnershipType: InAppOwnershipType?
    /// The UNIX time, in milliseconds, that the App Store signed this transaction.
    public var signedDate: Int64?
    public var revocationReason: RevocationReason?
    public var revocationDate: Int64?
    public var isUpgraded: Bool?
    public var offerType: OfferType?
    public var offerIdentifier: String?
    public var environment: AppStoreEnvironment?
    public var storefront: String?
    public var storefrontId: String?
    public var transactionReason: TransactionReason?
    public var currency: String?
    public var price: Int64?
    public var offerDiscountType: OfferDiscountType?
    /// The customer's identifier for this app, shared by all their transactions of the app.
    public var appTransactionId: String?
    /// The duration of the offer applied to the transaction (ISO 8601, for example `P1W`).
    public var offerPeriod: String?
    public var revocationType: RevocationType?
    /// The refunded share of the price in milliunits (for example 50000 is 50%).
    public var revocationPercentage: Int32?
    /// The original transaction this purchase continues (Apple documents it; its libraries lack it).
    public var previousOriginalTransactionId: String?
    /// Advanced Commerce API data, kept as Apple sent it.
    public var advancedCommerceInfo: RawJSON?
    public var billingPlanType: BillingPlanType?
    public var commitmentInfo: TransactionCommitmentInfo?

    public init(
        originalTransactionId: String? = nil, transactionId: String? = nil, webOrderLineItemId: String? = nil,
        bundleId: String? = nil, productId: String? = nil, subscriptionGroupIdentifier: String? = nil,
        purchaseDate: Int64? = nil, originalPurchaseDate: Int64? = nil, expiresDate: Int64? = nil,
        quantity: Int32? = nil, type: ProductType? = nil, appAccountToken: String? = nil,
        inAppOwnershipType: InAppOwnershipType? = nil, signedDate: Int64? = nil,
        revocationReason: RevocationReason? = nil, revocationDate: Int64? = nil, isUpgraded: Bool? = nil,
        offerType: OfferType? = nil, offerIdentifier: String? = nil, environment: AppStoreEnvironment? = nil,
        storefront: String? = nil, storefrontId: String? = nil, transactionReason: TransactionReason? = nil,
        currency: String? = nil, price: Int64? = nil, offerDiscountType: OfferDiscountType? = nil,
        appTransactionId: String? = nil, offerPeriod: String? = nil, revocationType: RevocationType? = nil,
        revocationPercentage: Int32? = nil, previousOriginalTransactionId: String? = nil,
        advancedCommerceInfo: RawJSON? = nil, billingPlanType: BillingPlanType? = nil,
        commitmentInfo: TransactionCommitmentInfo? = nil
    ) {
        self.originalTransactionId = originalTransactionId
        self.transactionId = transactionId
        self.webOrderLineItemId = webOrderLineItemId
        self.bundleId = bundleId
        self.productId = productId
        self.subscriptionGroupIdentifier = subscriptionGroupIdentifier
        self.purchaseDate = purchaseDate
        self.originalPurchaseDate = originalPurchaseDate
        self.expiresDate = expiresDate
        self.quantity = quantity
        self.type = type
        self.appAccountToken = appAccountToken
        self.inAppOwnershipType = inAppOwnershipType
        self.signedDate = signedDate
        self.revocationReason = revocationReason
        self.revocationDate = revocationDate
        self.isUpgraded = isUpgraded
        self.offerType = offerType
        self.offerIdentifier = offerIdentifier
        self.environment = environment
        self.storefront = storefront
        self.storefrontId = storefrontId
        self.transactionReason = transactionReason
        self.currency = currency
        self.price = price
        self.offerDiscountType = offerDiscountType
        self.appTransactionId = appTransactionId
        self.offerPeriod = offerPeriod
        self.revocationType = revocationType
        self.revocationPercentage = revocationPercentage
        self.previousOriginalTransactionId = previousOriginalTransactionId
        self.advancedCommerceInfo = advancedCommerceInfo
        self.billingPlanType = billingPlanType
        self.commitmentInfo = commitmentInfo
    }
}
