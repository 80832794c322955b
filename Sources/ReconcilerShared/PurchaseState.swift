package import AppStoreServer
import Foundation

/// The state of one purchase (a subscription or a one-time purchase, keyed by its
/// `originalTransactionId`) as `reconciler export` prints it, one JSON object per line.
///
/// This is not an Apple model: it is the shape both the reconciler's store and the mock App
/// Store's ground truth produce, so the two can be compared line by line. Dates are UNIX
/// milliseconds; absent values are `null`.
///
/// How it is derived from Apple's signed data:
/// - `latestTransactionId`, `productId`, `purchaseDate`, `expiresDate`, `revocationDate`,
///   `appAccountToken`: the purchase's latest transaction, i.e. the newest signed version of each
///   transaction, then the one not upgraded with the newest `purchaseDate` (ties: the greatest
///   `transactionId`);
/// - `autoRenewStatus`: the renewal info with the newest `signedDate`;
/// - `status`: Apple's subscription status (1 active … 5 revoked) with the newest `signedDate`,
///   from a notification or Get All Subscription Statuses; `null` for one-time purchases;
/// - `lastSignedDate`: the newest `signedDate` of a notification about this purchase;
/// - `entitled`: ``Entitlement`` at the moment the state is read (`null`: unknown);
/// - `appUserId`: the app's own ID for the customer, from the newest `reconciler import` that named
///   them (or an earlier purchase of the same customer); never from Apple;
/// - `appTransactionId`, `revocationType`, `revocationPercentage`, `offerType`, `offerIdentifier`:
///   the latest transaction's, as Apple signed them (`null` when it carries none; always present,
///   since schema version 0014, and `null` for a purchase not written since).
package struct PurchaseState: Codable, Hashable, Sendable {
    package var originalTransactionId: String
    package var latestTransactionId: String?
    package var productId: String?
    /// The app the purchase belongs to.
    package var bundleId: String?
    package var environment: AppStoreEnvironment?
    package var purchaseDate: Int64?
    package var expiresDate: Int64?
    package var revocationDate: Int64?
    package var autoRenewStatus: Int32?
    package var lastSignedDate: Int64?
    /// The app's own user id for the purchase (`appAccountToken`), when the app set one.
    package var appAccountToken: String?
    package var status: Int32?
    /// Whether the customer has what they paid for now; see ``Entitlement``. `null` when that
    /// cannot be known (a non-renewing subscription whose term the app did not configure).
    package var entitled: Bool?
    /// Apple's one identifier of the customer for the app, across devices and Family Sharing.
    package var appTransactionId: String?
    /// `REFUND_FULL`, `REFUND_PRORATED` or `FAMILY_REVOKE`, with a revocation.
    package var revocationType: String?
    /// The refunded share of a prorated refund, in milliunits (100000 is all of it).
    package var revocationPercentage: Int32?
    /// Apple's offer type: 1 introductory, 2 promotional, 3 offer code, 4 win-back.
    package var offerType: Int32?
    /// The offer's identifier (promotional offers, offer codes, win-back offers).
    package var offerIdentifier: String?
    /// The app's own ID for the customer, from `reconciler import` (not Apple's: Apple never sends
    /// it); kept for the customer's later purchases. `null` when no import named the customer.
    package var appUserId: String?

    package init(
        originalTransactionId: String, latestTransactionId: String? = nil, productId: String? = nil, bundleId: String? = nil,
        environment: AppStoreEnvironment? = nil, purchaseDate: Int64? = nil, expiresDate: Int64? = nil,
        revocationDate: Int64? = nil, autoRenewStatus: Int32? = nil, lastSignedDate: Int64? = nil,
        appAccountToken: String? = nil, status: Int32? = nil, entitled: Bool? = false, appTransactionId: String? = nil,
        revocationType: String? = nil, revocationPercentage: Int32? = nil, offerType: Int32? = nil, offerIdentifier: String? = nil,
        appUserId: String? = nil
    ) {
        self.originalTransactionId = originalTransactionId
        self.latestTransactionId = latestTransactionId
        self.productId = productId
        self.bundleId = bundleId
        self.environment = environment
        self.purchaseDate = purchaseDate
        self.expiresDate = expiresDate
        self.revocationDate = revocationDate
        self.autoRenewStatus = autoRenewStatus
        self.lastSignedDate = lastSignedDate
        self.appAccountToken = appAccountToken
        self.status = status
        self.entitled = entitled
        self.appTransactionId = appTransactionId
        self.revocationType = revocationType
        self.revocationPercentage = revocationPercentage
        self.offerType = offerType
        self.offerIdentifier = offerIdentifier
        self.appUserId = appUserId
    }

    private enum CodingKeys: String, CodingKey, CaseIterable {
        case originalTransactionId, latestTransactionId, productId, bundleId, environment, purchaseDate, expiresDate,
            revocationDate, autoRenewStatus, lastSignedDate, appAccountToken, status, entitled, appTransactionId, revocationType,
            revocationPercentage, offerType, offerIdentifier, appUserId
    }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            originalTransactionId: try container.decode(String.self, forKey: .originalTransactionId),
            latestTransactionId: try container.decodeIfPresent(String.self, forKey: .latestTransactionId),
            productId: try container.decodeIfPresent(String.self, forKey: .productId),
            bundleId: try container.decodeIfPresent(String.self, forKey: .bundleId),
            environment: try container.decodeIfPresent(AppStoreEnvironment.self, forKey: .environment),
            purchaseDate: try container.decodeIfPresent(Int64.self, forKey: .purchaseDate),
            expiresDate: try container.decodeIfPresent(Int64.self, forKey: .expiresDate),
            revocationDate: try container.decodeIfPresent(Int64.self, forKey: .revocationDate),
            autoRenewStatus: try container.decodeIfPresent(Int32.self, forKey: .autoRenewStatus),
            lastSignedDate: try container.decodeIfPresent(Int64.self, forKey: .lastSignedDate),
            appAccountToken: try container.decodeIfPresent(String.self, forKey: .appAccountToken),
            status: try container.decodeIfPresent(Int32.self, forKey: .status),
            // States recorded before `entitled` existed did not say; `null` is unknown.
            entitled: try container.decodeIfPresent(Bool.self, forKey: .entitled),
            // States recorded before schema version 0014 lack these: `null`, unknown.
            appTransactionId: try container.decodeIfPresent(String.self, forKey: .appTransactionId),
            revocationType: try container.decodeIfPresent(String.self, forKey: .revocationType),
            revocationPercentage: try container.decodeIfPresent(Int32.self, forKey: .revocationPercentage),
            offerType: try container.decodeIfPresent(Int32.self, forKey: .offerType),
            offerIdentifier: try container.decodeIfPresent(String.self, forKey: .offerIdentifier),
            // States recorded before schema version 0023 lack it: `null`, unknown.
            appUserId: try container.decodeIfPresent(String.self, forKey: .appUserId))
    }

    /// Encodes every field, absent ones as `null`, so each line has the same keys.
    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(originalTransactionId, forKey: .originalTransactionId)
        try container.encode(latestTransactionId, forKey: .latestTransactionId)
        try container.encode(productId, forKey: .productId)
        try container.encode(bundleId, forKey: .bundleId)
        try container.encode(environment, forKey: .environment)
        try container.encode(purchaseDate, forKey: .purchaseDate)
        try container.encode(expiresDate, forKey: .expiresDate)
        try container.encode(revocationDate, forKey: .revocationDate)
        try container.encode(autoRenewStatus, forKey: .autoRenewStatus)
        try container.encode(lastSignedDate, forKey: .lastSignedDate)
        try container.encode(appAccountToken, forKey: .appAccountToken)
        try container.encode(status, forKey: .status)
        try container.encode(entitled, forKey: .entitled)
        try container.encode(appTransactionId, forKey: .appTransactionId)
        try container.encode(revocationType, forKey: .revocationType)
        try container.encode(revocationPercentage, forKey: .revocationPercentage)
        try container.encode(offerType, forKey: .offerType)
        try container.encode(offerIdentifier, forKey: .offerIdentifier)
        try container.encode(appUserId, forKey: .appUserId)
    }

    /// One JSON line (keys sorted, no trailing newline).
    package func jsonLine() throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(self), as: UTF8.self)
    }

    /// The fields that differ between two states, by name, for reports.
    package func changedFields(from before: PurchaseState?) -> [String] {
        let before = before ?? PurchaseState(originalTransactionId: originalTransactionId)
        var fields: [String] = []
        if latestTransactionId != before.latestTransactionId { fields.append("latestTransactionId") }
        if productId != before.productId { fields.append("productId") }
        if environment != before.environment { fields.append("environment") }
        if purchaseDate != before.purchaseDate { fields.append("purchaseDate") }
        if expiresDate != before.expiresDate { fields.append("expiresDate") }
        if revocationDate != before.revocationDate { fields.append("revocationDate") }
        if autoRenewStatus != before.autoRenewStatus { fields.append("autoRenewStatus") }
        if lastSignedDate != before.lastSignedDate { fields.append("lastSignedDate") }
        if appAccountToken != before.appAccountToken { fields.append("appAccountToken") }
        if status != before.status { fields.append("status") }
        if entitled != before.entitled { fields.append("entitled") }
        if appTransactionId != before.appTransactionId { fields.append("appTransactionId") }
        if revocationType != before.revocationType { fields.append("revocationType") }
        if revocationPercentage != before.revocationPercentage { fields.append("revocationPercentage") }
        if offerType != before.offerType { fields.append("offerType") }
        if offerIdentifier != before.offerIdentifier { fields.append("offerIdentifier") }
        if appUserId != before.appUserId { fields.append("appUserId") }
        return fields
    }
}
