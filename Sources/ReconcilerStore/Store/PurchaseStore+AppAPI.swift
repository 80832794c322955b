import Foundation
package import PostgresNIO
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

    /// What names the purchases the app API reads.
    package enum PurchaseKey: Sendable, Hashable {
        /// The purchase of this original transaction.
        case originalTransactionId(String)
        /// The purchase a transaction (or an original transaction) belongs to.
        case transactionId(String)
        /// The purchases carrying this `appAccountToken`, in any letter case, on their latest
        /// transaction or on any transaction of theirs.
        case appAccountToken(String)
        /// The purchases of the app's own user ID (migration 0023).
        case appUserId(String)
    }

    /// The purchases of this store's app and environment `key` names, ordered by
    /// originalTransactionId, with `entitled` as of `now`; none stored: an empty list.
    ///
    /// One statement, outside an explicit transaction (``Database/readStatement(_:_:)``): the key's
    /// lookup and the purchases' rows are one snapshot, read in one round trip. This is the app
    /// API's stored read, the path that must keep up with 1,000 reads per second.
    package func checkedPurchases(_ key: PurchaseKey, at now: Timestamp = .now, in database: Database) async throws -> [CheckedPurchase] {
        try await database.readStatement(checkedPurchasesQuery(key)) { rows in try await checkedPurchases(rows, at: now) }
    }

    /// The statement of ``checkedPurchases(_:at:in:)``. A key other than the original transaction
    /// names its originalTransactionIds in an array the statement computes first (`= ANY(ARRAY(…))`,
    /// an InitPlan), so the purchases are then probed through their key: a semi-join here let the
    /// planner walk every purchase of the app and test each against the lookup (3 to 5 ms at 150
    /// purchases before their first ANALYZE, and growing with the app).
    package func checkedPurchasesQuery(_ key: PurchaseKey) throws -> PostgresQuery {
        var bindings = PostgresBindings()
        let condition: String
        switch key {
        case .originalTransactionId(let id):
            bindings.append(id)
            condition = "p.original_transaction_id = $1"
        case .transactionId(let id):
            bindings.append(id)
            condition = """
                p.original_transaction_id = ANY(ARRAY(
                    SELECT t.original_transaction_id FROM transactions t
                    WHERE t.bundle_id = $2 AND t.environment = $3 AND t.transaction_id = $1
                    UNION ALL SELECT $1))
                """
        case .appAccountToken(let token):
            bindings.append(Array(Set([token.lowercased(), token.uppercased(), token])).sorted())
            condition = """
                p.original_transaction_id = ANY(ARRAY(
                    SELECT o.original_transaction_id FROM purchases o
                    WHERE o.app_account_token = ANY($1::text[]) AND o.bundle_id = $2 AND o.environment = $3
                    UNION ALL SELECT t.original_transaction_id FROM transactions t
                    WHERE t.app_account_token = ANY($1::text[]) AND t.bundle_id = $2 AND t.environment = $3))
                """
        case .appUserId(let appUserId):
            bindings.append(appUserId)
            condition = "p.app_user_id = $1"
        }
        bindings.append(try bundleId)
        bindings.append(try environment)
        return PostgresQuery(
            unsafeSQL: """
                SELECT \(Self.purchaseColumns), history_checked_at_ms FROM \(purchasesSeen) p
                WHERE p.bundle_id = $2 AND p.environment = $3 AND \(condition)
                ORDER BY p.original_transaction_id
                """, binds: bindings)
    }

    /// These purchases of this store's app and environment, ordered by originalTransactionId, with
    /// `entitled` as of `now`; ids not stored are left out. One key lookup per id, in the caller's
    /// transaction (the app's handed-over transaction reads what it just wrote).
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
        return try await checkedPurchases(rows, at: now)
    }

    /// The purchases of rows that select ``purchaseColumns`` and `history_checked_at_ms`.
    private func checkedPurchases(_ rows: PostgresRowSequence, at now: Timestamp) async throws -> [CheckedPurchase] {
        var purchases: [CheckedPurchase] = []
        for try await row in rows {
            let checkedAt: Timestamp? = try NamedColumns(row)["history_checked_at_ms"]
            purchases.append(CheckedPurchase(state: try purchaseState(row, now: now), checkedAt: checkedAt))
        }
        return purchases
    }
}
