package import AppStoreServer

/// The payload bytes a stored signed value keeps, deflated (``Deflate``): a notification's
/// payload with its nested values cut out, then the payload of each nested value it holds
/// (`data.signedTransactionInfo` first, then `data.signedRenewalInfo`), each after a NUL byte
/// (JSON holds no raw NUL, so the cut is exact). A transaction keeps its payload alone. Headers
/// and signatures are stored beside them (``JWSParts``).
///
/// The stored bytes start with a format byte: 1 is raw DEFLATE with an 8 KB window and
/// ``dictionaryV1`` preset. Most of a payload's bytes are the field names Apple's JSON repeats in
/// every value; with them preset, a notification's 1.3 KB of JSON keeps about 300 bytes, without
/// them about 540.
///
/// ```swift
/// let stored = try #require(StoredPayloads(parts))          // at write time: rebuilt and compared
/// let payloads = StoredPayloads.inflate(stored.deflated, count: 1 + parts.nested.count)
/// ```
package struct StoredPayloads: Sendable, Hashable {
    /// What is stored.
    package let deflated: [UInt8]

    /// The most a stored value may inflate to: Apple's payloads are a few kilobytes.
    package static let limit = 1 << 20

    /// A notification's payloads, nested values in field order; `nil` when a payload holds a NUL
    /// byte or the stored bytes would not give them back exactly (the value is then stored whole).
    package init?(_ parts: NotificationPayloadParts) {
        var payloads = [parts.notification.payload]
        for field in NotificationPayloadParts.Field.allCases {
            if let nested = parts.nested.first(where: { $0.field == field }) { payloads.append(nested.parts.payload) }
        }
        self.init(payloads)
    }

    /// One value's payload (a transaction's).
    package init?(_ payload: [UInt8]) {
        self.init([payload])
    }

    private init?(_ payloads: [[UInt8]]) {
        guard !payloads.contains(where: { $0.contains(0) }) else { return nil }
        var joined: [UInt8] = []
        for (index, payload) in payloads.enumerated() {
            if index > 0 { joined.append(0) }
            joined.append(contentsOf: payload)
        }
        deflated = [Self.formatV1] + Deflate.compress(joined, dictionary: Self.dictionaryV1)
        // Rebuild and compare: what is stored must give back exactly what was signed.
        guard Self.inflate(deflated, count: payloads.count) == payloads else { return nil }
    }

    /// The payloads stored in `deflated`, or `nil` unless it inflates to exactly `count` of them.
    package static func inflate(_ deflated: [UInt8], count: Int) -> [[UInt8]]? {
        guard deflated.first == formatV1, let joined = Deflate.decompress(Array(deflated.dropFirst()), dictionary: dictionaryV1, limit: limit)
        else { return nil }
        let payloads = joined.split(separator: 0, omittingEmptySubsequences: false).map(Array.init)
        return payloads.count == count ? payloads : nil
    }

    /// The format byte of raw DEFLATE with ``dictionaryV1``.
    static let formatV1: UInt8 = 1

    /// The preset dictionary of format 1: the field names and common values of Apple's signed JSON
    /// (notifications, transactions, renewal info), the most frequent last (nearest). Never edit it:
    /// stored payloads inflate only with the exact bytes they were deflated with; a better
    /// dictionary is a new format byte beside this one.
    static let dictionaryV1: [UInt8] = Array(
        ("""
        "summary":{"requestIdentifier":"","succeededCount":,"failedCount":,"productId":"","storefrontCountryCodes":[]},        "externalPurchaseToken":{"externalPurchaseId":"","tokenCreationDate":,"appAppleId":,"bundleId":""},        "appData":{"signedAppTransactionInfo":"","consumptionRequestReason":"UNINTENDED_PURCHASE",        "revocationReason":,"revocationDate":,"revocationType":"REFUND_FULL","revocationPercentage":,"isUpgraded":true,        "offerIdentifier":"","offerPeriod":"P1M","offerDiscountType":"FREE_TRIAL","offerType":,"billingPlanType":"",        "advancedCommerceInfo":,"commitmentInfo":,"previousOriginalTransactionId":"","renewalBillingPlanType":"",        "expirationIntent":,"gracePeriodExpiresDate":,"priceIncreaseStatus":,"eligibleWinBackOfferIds":[],        "isInBillingRetryPeriod":false,"recentSubscriptionStartDate":,"renewalDate":,"renewalPrice":,        {"originalTransactionId":"","autoRenewProductId":"","productId":"","autoRenewStatus":1,        "subtype":"INITIAL_BUY","subtype":"RESUBSCRIBE","subtype":"VOLUNTARY","notificationType":"EXPIRED",        "notificationType":"SUBSCRIBED","notificationType":"DID_RENEW","notificationUUID":"",        "data":{"appAppleId":,"bundleId":"","bundleVersion":"","environment":"Sandbox","environment":"Production",        "signedTransactionInfo":"","signedRenewalInfo":"","status":1},"version":"2.0","signedDate":        {"transactionId":"","originalTransactionId":"","webOrderLineItemId":"","bundleId":"","productId":"",        "subscriptionGroupIdentifier":"","purchaseDate":,"originalPurchaseDate":,"expiresDate":,"quantity":1,        "type":"Consumable","type":"Non-Consumable","type":"Non-Renewing Subscription","type":"Auto-Renewable Subscription",        "inAppOwnershipType":"FAMILY_SHARED","inAppOwnershipType":"PURCHASED","appAccountToken":"",        "signedDate":,"environment":"Sandbox","environment":"Production","transactionReason":"PURCHASE",        "transactionReason":"RENEWAL","storefront":"USA","storefrontId":"143441","price":,"currency":"USD","appTransactionId":""
        """).utf8)
}

/// A notification's signed payload as the store keeps it: taken apart (``NotificationPayloadParts``,
/// each header stored once) with its payloads deflated (``StoredPayloads``).
package struct NotificationStorage: Sendable {
    package let parts: NotificationPayloadParts
    package let payloads: StoredPayloads

    /// `nil` when the parts would not rebuild `signedPayload` byte for byte: it is stored whole.
    /// - Parameter nested: the nested signed values the payload holds (as its JSON decodes them).
    package init?(_ signedPayload: String, nested: [NotificationPayloadParts.Field: String]) {
        guard let parts = NotificationPayloadParts(signedPayload, nested: nested), let payloads = StoredPayloads(parts) else { return nil }
        self.parts = parts
        self.payloads = payloads
    }

    /// The nested values a notification's payload names, read without verifying (to store a value
    /// that was verified when it arrived: compaction of rows written before migration 0015).
    package static func nestedValues(of signedPayload: String) -> [NotificationPayloadParts.Field: String] {
        let data = UnverifiedPayload.decode(signedPayload, as: ResponseBodyV2DecodedPayload.self)?.data
        var nested: [NotificationPayloadParts.Field: String] = [:]
        nested[.signedTransactionInfo] = data?.signedTransactionInfo
        nested[.signedRenewalInfo] = data?.signedRenewalInfo
        return nested
    }
}
