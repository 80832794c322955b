package import ReconcilerDomain
package import ReconcilerShared
package import ReconcilerStore

/// The purchases of one app and environment as the app API reads them from the store: by
/// original transaction, by any transaction, by `appAccountToken` or by the app's user ID.
///
/// ```swift
/// let purchases = try await AppPurchases(scope: target.scope, database: database).stored(.transactionId("2000000000000001"))
/// ```
package struct AppPurchases: Sendable {
    package let scope: AppScope
    package let database: Database

    package init(scope: AppScope, database: Database) {
        self.scope = scope
        self.database = database
    }

    /// The stored purchases `key` names (none: an empty list), `entitled` as of `now`, each
    /// `fresh: false` (the store's state, not Apple's answer to this request). One statement, no
    /// explicit transaction (``PurchaseStore/checkedPurchases(_:at:in:)``).
    package func stored(_ key: PurchaseQuery.Key, at now: Timestamp = .now) async throws -> [AppPurchase] {
        let storeKey: PurchaseStore.PurchaseKey =
            switch key {
            case .originalTransactionId(let id): .originalTransactionId(id)
            case .transactionId(let id): .transactionId(id)
            case .appAccountToken(let token): .appAccountToken(token)
            case .appUserId(let appUserId): .appUserId(appUserId)
            }
        let checked = try await PurchaseStore(database: database, scope: scope).checkedPurchases(storeKey, at: now, in: database)
        return checked.map { AppPurchase(state: $0.state, checkedAt: $0.checkedAt, fresh: false) }
    }
}
