/// A decoded payload containing transaction information.
///
/// [JWSTransactionDecodedPayload](https://developer.apple.com/documentation/appstoreserverapi/jwstransactiondecodedpayload)
///
/// It is the payload of a `signedTransactionInfo`, or of an entry of `signedTransactions`.
/// All dates are UNIX times in milliseconds. Prices are in milliunits of ``currency``.
public struct JWSTransactionDecodedPayload: Codable, Hashable, Sendable {
    /// The original transaction identifier of a purchase.
    ///
    /// [originalTransactionId](https://developer.apple.com/documentation/appstoreserverapi/originaltransactionid)
    public var originalTransactionId: String?

    /// The unique identifier for a transaction such as an in-app purchase, restored in-app purchase, or subscription renewal.
    ///
    /// [transactionId](https://developer.apple.com/documentation/appstoreserverapi/transactionid)
    public var transactionId: String?

    /// The unique identifier of subscription-purchase events across devices, including renewals.
    ///
    /// [webOrderLineItemId](https://developer.apple.com/documentation/appstoreserverapi/weborderlineitemid)
    public var webOrderLineItemId: String?

    /// The bundle identifier of an app.
    ///
    /// [bundleId](https://developer.apple.com/documentation/appstoreserverapi/bundleid)
    public var bundleId: String?

    /// The unique identifier for the product, that you create in App Store Connect.
    ///
    /// [productId](https://developer.apple.com/documentation/appstoreserverapi/productid)
    public var productId: String?

    /// The identifier of the subscription group that the subscription belongs to.
    ///
    /// [subscriptionGroupIdentifier](https://developer.apple.com/documentation/appstoreserverapi/subscriptiongroupidentifier)
    public var subscriptionGroupIdentifier: String?

    /// The UNIX time, in milliseconds, that the App Store charged the customer for a purchase, restored purchase, or renewal after a lapse.
    ///
    /// [purchaseDate](https://developer.apple.com/documentation/appstoreserverapi/purchasedate)
    public var purchaseDate: Int64?

    /// The purchase date of the transaction associated with the original transaction identifier.
    ///
    /// [originalPurchaseDate](https://developer.apple.com/documentation/appstoreserverapi/originalpurchasedate)
    public var originalPurchaseDate: Int64?

    /// The UNIX time, in milliseconds, an auto-renewable subscription expires or renews.
    ///
    /// [expiresDate](https://developer.apple.com/documentation/appstoreserverapi/expiresdate)
    public var expiresDate: Int64?

    /// The number of consumable products purchased.
    ///
    /// [quantity](https://developer.apple.com/documentation/appstoreserverapi/quantity)
    public var quantity: Int32?

    /// The type of the in-app purchase (Apple's field name is `type`).
    ///
    /// [type](https://developer.apple.com/documentation/appstoreserverapi/type)
    public var type: ProductType?

    /// The UUID that an app optionally generates to map a customer's in-app purchase with its resulting App Store transaction.
    ///
    /// [appAccountToken](https://developer.apple.com/documentation/appstoreserverapi/appaccounttoken)
    public var appAccountToken: String?

    /// A string that describes whether the transaction was purchased by the customer, or is available to them through Family Sharing.
    ///
    /// [inAppOwnershipType](https://developer.apple.com/documentation/appstoreserverapi/inappownershiptype)
    public var inAppOwnershipType: InAppOwnershipType?

    /// The UNIX time, in milliseconds, that the App Store signed the JSON Web Signature data.
    ///
    /// [signedDate](https://developer.apple.com/documentation/appstoreserverapi/signeddate)
    public var signedDate: Int64?

    /// The reason that the App Store refunded the transaction or revoked it from Family Sharing.
    ///
    /// [revocationReason](https://developer.apple.com/documentation/appstoreserverapi/revocationreason)
    public var revocationReason: RevocationReason?

    /// The UNIX time, in milliseconds, that the App Store refunded the transaction or revoked it from Family Sharing.
    ///
    /// [revocationDate](https://developer.apple.com/documentation/appstoreserverapi/revocationdate)
    public var revocationDate: Int64?

    /// A Boolean value that indicates whether the customer upgraded to another subscription.
    ///
    /// [isUpgraded](https://developer.apple.com/documentation/appstoreserverapi/isupgraded)
    public var isUpgraded: Bool?

    /// A value that represents the promotional offer type.
    ///
    /// [offerType](https://developer.apple.com/documentation/appstoreserverapi/offertype)
    public var offerType: OfferType?

    /// The identifier that contains the offer code or the promotional offer identifier.
    ///
    /// [offerIdentifier](https://developer.apple.com/documentation/appstoreserverapi/offeridentifier)
    public var offerIdentifier: String?

    /// The server environment, either sandbox or production.
    ///
    /// [environment](https://developer.apple.com/documentation/appstoreserverapi/environment)
    public var environment: AppStoreEnvironment?

    /// The three-letter code that represents the country or region associated with the App Store storefront for the purchase.
    ///
    /// [storefront](https://developer.apple.com/documentation/appstoreserverapi/storefront)
    public var storefront: String?

    /// An Apple-defined value that uniquely identifies the App Store storefront associated with the purchase.
    ///
    /// [storefrontId](https://developer.apple.com/documentation/appstoreserverapi/storefrontid)
    public var storefrontId: String?

    /// The reason for the purchase transaction: a customer's purchase, or a renewal of an auto-renewable subscription that the system initiates.
    ///
    /// [transactionReason](https://developer.apple.com/documentation/appstoreserverapi/transactionreason)
    public var transactionReason: TransactionReason?

    /// The three-letter ISO 4217 currency code for the price of the product; present only with ``price``.
    ///
    /// [currency](https://developer.apple.com/documentation/appstoreserverapi/currency)
    public var currency: String?

    /// The price, in milliunits, of the in-app purchase or subscription offer that you configured in App Store Connect.
    ///
    /// [price](https://developer.apple.com/documentation/appstoreserverapi/price)
    ///
    /// Apple advises against using it for revenue reconciliation; App Store Connect reports are the record.
    public var price: Int64?

    /// The payment mode you configure for the offer.
    ///
    /// [offerDiscountType](https://developer.apple.com/documentation/appstoreserverapi/offerdiscounttype)
    public var offerDiscountType: OfferDiscountType?

    /// The unique identifier of the app download transaction.
    ///
    /// [appTransactionId](https://developer.apple.com/documentation/appstoreserverapi/apptransactionid)
    ///
    /// It is the customer's identifier for this app, shared by all their transactions of the app.
    public var appTransactionId: String?

    /// The duration of the offer applied to the transaction (ISO 8601, for example `P1W`).
    ///
    /// [offerPeriod](https://developer.apple.com/documentation/appstoreserverapi/offerperiod)
    public var offerPeriod: String?

    /// The type of the refund or revocation that applies to the transaction.
    ///
    /// [revocationType](https://developer.apple.com/documentation/appstoreservernotifications/revocationtype)
    public var revocationType: RevocationType?

    /// The percentage, in milliunits, of the transaction that the App Store has refunded or revoked (for example 50000 is 50%).
    ///
    /// [revocationPercentage](https://developer.apple.com/documentation/appstoreservernotifications/revocationpercentage)
    public var revocationPercentage: Int32?

    /// The original transaction identifier of a subscription before migration.
    ///
    /// [previousOriginalTransactionId](https://developer.apple.com/documentation/appstoreservernotifications/previousoriginaltransactionid)
    ///
    /// Apple documents it (2025-03-24); Apple's libraries don't have it.
    public var previousOriginalTransactionId: String?

    /// Transaction information that is present only for Advanced Commerce SKUs, kept as Apple sent it.
    ///
    /// [advancedCommerceTransactionInfo](https://developer.apple.com/documentation/appstoreserverapi/advancedcommercetransactioninfo)
    public var advancedCommerceInfo: RawJSON?

    /// How the subscription is billed when it has a commitment.
    ///
    /// [billingPlanType](https://developer.apple.com/documentation/appstoreserverapi/billingplantype)
    public var billingPlanType: BillingPlanType?

    /// Where the transaction stands in the subscription's commitment; present only for subscriptions with a commitment.
    ///
    /// [TransactionCommitmentInfo](https://developer.apple.com/documentation/appstoreserverapi/transactioncommitmentinfo)
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
