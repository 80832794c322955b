import Foundation
import PostgresNIO
package import ReconcilerDomain
package import ReconcilerShared

/// The app's own ID for each customer (`appUserId`, migration 0023): `reconciler import` gives it
/// to the customer's purchases; a later purchase of the same customer takes it in the write path
/// (``inheritedAppUserId``); `export`, the change feed, `repair` and the app API select by it.
extension PurchaseStore {
    /// Gives `appUserId` to every stored purchase of the customer `anchor` (the purchases its
    /// transaction history covers), replacing another one; each purchase it changes gets a row in
    /// the change feed (`origin`'s source and run) and is returned. Takes the purchases' locks
    /// first, so the caller's transaction must not have written yet.
    package func assignAppUserId(
        _ appUserId: String, toCustomer anchor: String, origin: ChangeOrigin, on transaction: DatabaseTransaction
    ) async throws -> [PurchaseChange] {
        let originals = try await customerPurchases(of: [anchor], anchors: [anchor], on: transaction)
        guard !originals.isEmpty else { return [] }
        try await lock(purchases: originals, anchors: [anchor], on: transaction)
        let before = try await purchaseStates(originals, on: transaction)
        let (bundleId, environment) = (try bundleId, try environment)
        let rows = try await transaction.query(
            """
            UPDATE purchases SET app_user_id = \(appUserId), updated_at = now()
            WHERE bundle_id = \(bundleId) AND environment = \(environment) AND original_transaction_id = ANY(\(originals.sorted())::text[])
              AND app_user_id IS DISTINCT FROM \(appUserId)
            RETURNING \(unescaped: Self.purchaseColumns)
            """, logger: logger)
        var changes: [PurchaseChange] = []
        for try await row in rows {
            let after = try purchaseState(row)
            changes.append(PurchaseChange(before: before[after.originalTransactionId], after: after))
        }
        try await recordInFeed(changes, events: [], origin: origin, on: transaction)
        return changes.sorted { $0.after.originalTransactionId < $1.after.originalTransactionId }
    }

    /// The purchases of one app user in this store's app and environment, by the app's own ID for
    /// them (`appUserId`, which `reconciler import` gives), in the `export` shape with `entitled` as
    /// of `now`, ordered by originalTransactionId; empty when no stored purchase carries it. The
    /// one lookup by app user: `repair --app-user-id` and the app API (`GET /v1/purchases?appUserId=`)
    /// read it. A dry run's copies win over the real rows.
    package func purchaseStates(
        ofAppUserId appUserId: String, at now: Timestamp = .now, on transaction: DatabaseTransaction
    ) async throws -> [PurchaseState] {
        try await purchaseStatesSeen(where: "p.app_user_id = $1", binding: appUserId, at: now, on: transaction)
    }
}
