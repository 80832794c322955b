import Foundation
import PostgresNIO
package import ReconcilerShared

/// Reading purchases for the app API (`GET /v1/purchases`): each with when Apple was last asked
/// about its customer.
extension PurchaseStore {
    /// A purchase as `export` shows it, and when its customer's transaction history was last read
    /// from Apple (`history_checked_at_ms`: a run's gap filler, a repair, an import; `nil` when never).
    package struct CheckedPurchase: Sendable, Hashable {
        package var state: PurchaseState
        package var checkedAt: Timestamp?
    }

    /// These purchases of this store's app and environment, ordered by originalTransactionId, with
    /// `entitled` as of `now`; ids not stored are left out. One key lookup per id.
    package func checkedPurchases(
        _ originalTransactionIds: [String], at now: Timestamp = .now, on transaction: DatabaseTransaction
    ) async throws -> [CheckedPurchase] {
        guard !originalTransactionIds.isEmpty else { return [] }
        let (bundleId, environment) = (try bundleId, try environment)
        let rows = try await transaction.query(
            """
            SELECT \(unescaped: Self.purchaseColumns), history_checked_at_ms
            FROM unnest(\(Array(Set(originalTransactionIds)))::text[]) AS wanted (id)
            JOIN purchases p ON p.bundle_id = \(bundleId) AND p.environment = \(environment) AND p.original_transaction_id = wanted.id
            ORDER BY p.original_transaction_id
            """, logger: logger)
        var purchases: [CheckedPurchase] = []
        for try await row in rows {
            let checkedAt: Timestamp? = try NamedColumns(row)["history_checked_at_ms"]
            purchases.append(CheckedPurchase(state: try purchaseState(row, now: now), checkedAt: checkedAt))
        }
        return purchases
    }
}
