import Foundation
import PostgresNIO
package import ReconcilerDomain
package import ReconcilerShared

/// Reading one customer's purchases, for `reconciler repair`. In a dry run every read sees the
/// run's shadow copies where it has them and the real rows elsewhere, so a dry run reads the
/// state the real repair would leave.
extension PurchaseStore {
    /// The purchases table as this store sees it: in a dry run, the shadow copies first, then the
    /// real rows not copied (a subquery, so predicates reach both tables' indexes).
    var purchasesSeen: String {
        guard let shadow else { return "purchases" }
        return """
            (SELECT * FROM purchases UNION ALL SELECT * FROM \(shadow.realSchemaIdentifier).purchases r
             WHERE NOT EXISTS (SELECT 1 FROM purchases s WHERE (s.bundle_id, s.environment, s.original_transaction_id)
                                                         = (r.bundle_id, r.environment, r.original_transaction_id)))
            """
    }

    /// The purchases of a transaction id (any transaction of a purchase, or its original), if stored.
    package func originalTransactionIds(ofTransaction transactionId: String, on transaction: DatabaseTransaction) async throws -> [String] {
        let (bundleId, environment) = (try bundleId, try environment)
        let rows = try await transaction.query(
            """
            SELECT original_transaction_id FROM transactions
            WHERE bundle_id = \(bundleId) AND environment = \(environment) AND transaction_id = \(transactionId)
            UNION SELECT original_transaction_id FROM purchases
            WHERE bundle_id = \(bundleId) AND environment = \(environment) AND original_transaction_id = \(transactionId)
            """, logger: logger)
        var originals: [String] = []
        for try await original in rows.decode(String.self) { originals.append(original) }
        return originals.sorted()
    }

    /// The stored purchases of an app user (`appAccountToken`, matched in either letter case),
    /// by their latest transaction or any transaction of theirs.
    package func originalTransactionIds(ofAppAccountToken token: String, on transaction: DatabaseTransaction) async throws -> [String] {
        let spellings = Array(Set([token.lowercased(), token.uppercased(), token]))
        let (bundleId, environment) = (try bundleId, try environment)
        let rows = try await transaction.query(
            """
            SELECT original_transaction_id FROM purchases
            WHERE app_account_token = ANY(\(spellings)::text[]) AND bundle_id = \(bundleId) AND environment = \(environment)
            UNION SELECT original_transaction_id FROM transactions
            WHERE app_account_token = ANY(\(spellings)::text[]) AND bundle_id = \(bundleId) AND environment = \(environment)
            """, logger: logger)
        var originals: [String] = []
        for try await original in rows.decode(String.self) { originals.append(original) }
        return originals.sorted()
    }

    /// The purchases of the customers these purchases belong to: the purchases themselves, and
    /// every purchase linked to the same customer (the same transaction history anchor) or to one of `anchors`.
    package func customerPurchases(
        of originalTransactionIds: [String], anchors: [String] = [], on transaction: DatabaseTransaction
    ) async throws -> Set<String> {
        guard !originalTransactionIds.isEmpty || !anchors.isEmpty else { return [] }
        var bindings = PostgresBindings()
        bindings.append(originalTransactionIds)
        bindings.append(anchors)
        bindings.append(try bundleId)
        bindings.append(try environment)
        let rows = try await transaction.query(
            PostgresQuery(
                unsafeSQL: """
                    SELECT p.original_transaction_id FROM \(purchasesSeen) p
                    WHERE p.bundle_id = $3 AND p.environment = $4
                      AND (p.original_transaction_id = ANY($1::text[]) OR p.history_anchor_transaction_id = ANY($2::text[])
                       OR p.history_anchor_transaction_id IN (
                           SELECT q.history_anchor_transaction_id FROM \(purchasesSeen) q
                           WHERE q.bundle_id = $3 AND q.environment = $4
                             AND q.original_transaction_id = ANY($1::text[]) AND q.history_anchor_transaction_id IS NOT NULL))
                    """, binds: bindings), logger: logger)
        var originals = Set<String>()
        for try await original in rows.decode(String.self) { originals.insert(original) }
        return originals
    }

    /// The state of these purchases as this store sees them (a dry run's copies where it made them).
    package func purchaseStatesSeen(
        _ originalTransactionIds: some Collection<String>, on transaction: DatabaseTransaction
    ) async throws -> [String: PurchaseState] {
        guard !originalTransactionIds.isEmpty else { return [:] }
        let states = try await purchaseStatesSeen(
            where: "p.original_transaction_id = ANY($1::text[])", binding: Array(originalTransactionIds), on: transaction)
        return Dictionary(states.map { ($0.originalTransactionId, $0) }, uniquingKeysWith: { $1 })
    }

    /// The purchases of this store's app and environment as it sees them that `condition` (SQL on
    /// `p`, whose one parameter `$1` is `value`) selects, ordered by originalTransactionId, with
    /// `entitled` as of `now`.
    func purchaseStatesSeen(
        where condition: String, binding value: some PostgresThrowingDynamicTypeEncodable, at now: Timestamp = .now,
        on transaction: DatabaseTransaction
    ) async throws -> [PurchaseState] {
        var bindings = PostgresBindings()
        try bindings.append(value)
        bindings.append(try bundleId)
        bindings.append(try environment)
        let rows = try await transaction.query(
            PostgresQuery(
                unsafeSQL: """
                    SELECT \(Self.purchaseColumns) FROM \(purchasesSeen) p
                    WHERE p.bundle_id = $2 AND p.environment = $3 AND \(condition)
                    ORDER BY p.original_transaction_id
                    """, binds: bindings), logger: logger)
        var states: [PurchaseState] = []
        for try await row in rows { states.append(try purchaseState(row, now: now)) }
        return states
    }

    /// What a run's writes from these sources changed, per purchase: the state before its first
    /// change and after its last, from the change feed (a dry run's own feed while it runs).
    package func changes(runId: Int64, sources: [ChangeSource], on transaction: DatabaseTransaction) async throws -> [PurchaseChange] {
        // The feed has no index on the run: its rows are newer than the run's start.
        let rows = try await transaction.query(
            """
            SELECT before_state::text, after_state::text FROM purchase_changes
            WHERE changed_at >= (SELECT started_at FROM reconcile_runs WHERE run_id = \(runId)) AND run_id = \(runId)
              AND source = ANY(\(sources.map(\.rawValue))::text[])
            ORDER BY xid, change_id
            """, logger: logger)
        let decoder = JSONDecoder()
        var byPurchase: [String: PurchaseChange] = [:]
        for try await (before, after) in rows.decode((String?, String).self) {
            let change = PurchaseChange(
                before: try before.map { try decoder.decode(PurchaseState.self, from: Data($0.utf8)) },
                after: try decoder.decode(PurchaseState.self, from: Data(after.utf8)))
            let id = change.after.originalTransactionId
            byPurchase[id] = PurchaseChange(before: byPurchase[id].map(\.before) ?? change.before, after: change.after)
        }
        return byPurchase.keys.sorted().map { byPurchase[$0]! }
    }
}
