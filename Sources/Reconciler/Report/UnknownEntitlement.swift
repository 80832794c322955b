package import ReconcilerDomain
import ReconcilerShared
package import ReconcilerStore

/// How many purchases of an app and environment have an unknown `entitled` (`null` in `export`
/// and the change feed), and which setting decides it: non-renewing subscriptions whose product
/// has no term. Apple sends no `expiresDate` for them; how long one lasts is the app's choice,
/// given to the reconciler as `nonRenewingTerms` (the configuration file) or
/// RECONCILER_NON_RENEWING_TERMS (without one). A run's report and `status` say it, so a `null`
/// never goes unexplained.
///
/// ```swift
/// let unknown = try await UnknownEntitlement.count(of: scope, setting: "nonRenewingTerms in /etc/reconciler/reconciler.yaml", in: database)
/// if let line = unknown.line { print(line) }
/// ```
package struct UnknownEntitlement: Sendable, Codable, Hashable {
    /// Purchases whose `entitled` is unknown, now.
    package var purchases: Int
    /// Their products, each without a term (`""`: a purchase Apple named no product for).
    package var products: [String]
    /// Where the terms are set for this app: `nonRenewingTerms in FILE`, or `RECONCILER_NON_RENEWING_TERMS`.
    package var setting: String

    package init(purchases: Int, products: [String], setting: String) {
        self.purchases = purchases
        self.products = products
        self.setting = setting
    }

    /// Counts the app and environment's purchases the scope's rule cannot judge.
    package static func count(of scope: AppScope, setting: String, in database: Database) async throws -> UnknownEntitlement {
        let store = PurchaseStore(database: database, scope: scope)
        let byProduct = try await database.transaction { transaction in
            try await store.unknownEntitlement(of: scope.target, policy: scope.entitlement, on: transaction)
        }
        return UnknownEntitlement(purchases: byProduct.values.reduce(0, +), products: byProduct.keys.sorted(), setting: setting)
    }

    /// The setting that gives the terms: the configuration file's key, or the variable without a file.
    package static func setting(configurationFile: String?) -> String {
        configurationFile.map { "nonRenewingTerms in \($0)" } ?? "RECONCILER_NON_RENEWING_TERMS"
    }

    /// What the operator reads, `nil` when every purchase is judged.
    package var line: String? {
        guard purchases > 0 else { return nil }
        let shown = products.prefix(5).map { $0.isEmpty ? "(no product)" : $0 }.joined(separator: ", ") + (products.count > 5 ? ", …" : "")
        return "\(Plural.count(purchases, "purchase")) with entitled unknown (null in export): non-renewing "
            + "\(products.count == 1 ? "product" : "products") \(shown) without a term; set how long each lasts in \(setting)"
    }
}
