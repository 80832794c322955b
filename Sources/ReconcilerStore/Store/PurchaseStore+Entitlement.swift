package import AppStoreServer
import PostgresNIO
import ReconcilerDomain
package import ReconcilerShared

extension PurchaseStore {
    /// The purchases of an app and environment whose `entitled` the app's rule cannot judge
    /// (``Entitlement/isEntitled(_:at:policy:)`` answers `nil`: `null` in `export` and the feed), by
    /// product: non-renewing subscriptions, not revoked, with no `expiresDate`, whose product has no
    /// term in `policy` (or that carry no purchase date). Apple does not say how long a non-renewing
    /// subscription lasts; the app does (`nonRenewingTerms`).
    package func unknownEntitlement(
        of app: AppTarget, policy: EntitlementPolicy, on transaction: DatabaseTransaction
    ) async throws -> [String: Int] {
        let productType = "Non-Renewing Subscription"
        let rows = try await transaction.query(
            """
            SELECT COALESCE(product_id, ''), purchase_date_ms IS NOT NULL, count(*)::bigint FROM purchases
            WHERE bundle_id = \(app.bundleId) AND environment = \(app.environment.rawValue) AND product_type = \(productType)
              AND revocation_date_ms IS NULL AND expires_date_ms IS NULL
            GROUP BY 1, 2
            """, logger: logger)
        var unknown: [String: Int] = [:]
        for try await (product, dated, count) in rows.decode((String, Bool, Int64).self) {
            // The rule itself decides, so this counts what `export` shows as null.
            let facts = Entitlement.Facts(
                productType: productType, productId: product.isEmpty ? nil : product, environment: app.environment,
                purchaseDate: dated ? 0 : nil)
            if Entitlement.isEntitled(facts, at: .now, policy: policy) == nil { unknown[product, default: 0] += Int(count) }
        }
        return unknown
    }
}
