import Foundation

/// The state of one purchase (a subscription or a one-time purchase, keyed by its
/// `originalTransactionId`) as `reconciler export` prints it, one JSON object per line.
///
/// This is not an Apple model: it is the shape both the reconciler's store and the mock App
/// Store's ground truth produce, so the two can be compared line by line. Dates are UNIX
/// milliseconds; absent values are `null`.
///
/// How it is derived from Apple's signed data:
/// - `latestTransactionId`, `productId`, `purchaseDate`, `expiresDate`, `revocationDate`: the
///   purchase's latest transaction, i.e. the newest signed version of each transaction, then the
///   one not upgraded with the newest `purchaseDate` (ties: the greatest `transactionId`);
/// - `autoRenewStatus`: the renewal info with the newest `signedDate`;
/// - `lastSignedDate`: the newest `signedDate` of a notification about this purchase.
public struct PurchaseState: Codable, Hashable, Sendable {
    public var originalTransactionId: String
    public var latestTransactionId: String?
    public var productId: String?
    public var environment: String?
    public var purchaseDate: Int64?
    public var expiresDate: Int64?
    public var revocationDate: Int64?
    public var autoRenewStatus: Int32?
    public var lastSignedDate: Int64?

    public init(originalTransactionId: String, latestTransactionId: String? = nil, productId: String? = nil,
                environment: String? = nil, purchaseDate: Int64? = nil, expiresDate: Int64? = nil,
                revocationDate: Int64? = nil, autoRenewStatus: Int32? = nil, lastSignedDate: Int64? = nil) {
        self.originalTransactionId = originalTransactionId
        self.latestTransactionId = latestTransactionId
        self.productId = productId
        self.environment = environment
        self.purchaseDate = purchaseDate
        self.expiresDate = expiresDate
        self.revocationDate = revocationDate
        self.autoRenewStatus = autoRenewStatus
        self.lastSignedDate = lastSignedDate
    }

    private enum CodingKeys: String, CodingKey {
        case originalTransactionId, latestTransactionId, productId, environment, purchaseDate, expiresDate,
             revocationDate, autoRenewStatus, lastSignedDate
    }

    /// Encodes every field, absent ones as `null`, so each line has the same keys.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(originalTransactionId, forKey: .originalTransactionId)
        try container.encode(latestTransactionId, forKey: .latestTransactionId)
        try container.encode(productId, forKey: .productId)
        try container.encode(environment, forKey: .environment)
        try container.encode(purchaseDate, forKey: .purchaseDate)
        try container.encode(expiresDate, forKey: .expiresDate)
        try container.encode(revocationDate, forKey: .revocationDate)
        try container.encode(autoRenewStatus, forKey: .autoRenewStatus)
        try container.encode(lastSignedDate, forKey: .lastSignedDate)
    }

    /// One JSON line (keys sorted, no trailing newline).
    public func jsonLine() throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(self), as: UTF8.self)
    }

    /// The fields that differ between two states, by name, for reports.
    public func changedFields(from before: PurchaseState?) -> [String] {
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
        return fields
    }
}
