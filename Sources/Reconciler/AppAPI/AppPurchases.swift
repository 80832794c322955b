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
    /// `fresh: false` (the store's state, not Apple's answer to this request).
    package func stored(_ key: PurchaseQuery.Key, at now: Timestamp = .now) async throws -> [AppPurchase] {
        let store = PurchaseStore(database: database, scope: scope)
        let checked = try await database.transaction { transaction in
            let originals: [String]
            switch key {
            case .originalTransactionId(let id): originals = [id]
            case .transactionId(let id): originals = try await store.originalTransactionIds(ofTransaction: id, on: transaction)
            case .appAccountToken(let token): originals = try await store.originalTransactionIds(ofAppAccountToken: token, on: transaction)
            case .appUserId(let appUserId):
                originals = try await store.purchaseStates(ofAppUserId: appUserId, at: now, on: transaction).map(\.originalTransactionId)
            }
            return try await store.checkedPurchases(originals, at: now, on: transaction)
        }
        return checked.map { AppPurchase(state: $0.state, checkedAt: $0.checkedAt, fresh: false) }
    }
}
