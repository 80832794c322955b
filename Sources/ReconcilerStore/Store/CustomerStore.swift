package import AppStoreServer
import Foundation
package import Logging
import PostgresNIO
import ReconcilerDomain
package import ReconcilerShared

/// The SQL of customers and their transaction history: `history_revisions` (where Get Transaction
/// History resumes for each customer) and the purchases' link to their customer
/// (`history_anchor_transaction_id`, `history_checked_at_ms`, the due time). A customer is named by
/// its anchor, the transaction id whose history covers all its purchases.
///
/// In a dry run it reads and writes the run's ``ShadowSchema`` copies, like ``PurchaseStore``.
///
/// ```swift
/// let revision = try await store.customers.revision(anchor: anchor, on: transaction)
/// ```
package struct CustomerStore: Sendable {
    package let logger: Logger
    package let shadow: ShadowSchema?
    package let target: AppTarget

    package init(logger: Logger, shadow: ShadowSchema? = nil, target: AppTarget) {
        self.logger = logger
        self.shadow = shadow
        self.target = target
    }

    private var bundleId: String { target.bundleId }
    private var environment: AppStoreEnvironment { target.environment }

    /// The customers (the transaction id whose history covers each) of these purchases; purchases
    /// not yet linked to a customer are their own.
    package func anchors(of originalTransactionIds: [String], on transaction: DatabaseTransaction) async throws -> [String] {
        Array(Set(try await anchorsByPurchase(of: originalTransactionIds, on: transaction).values))
    }

    /// The customer of each purchase, by originalTransactionId.
    package func anchorsByPurchase(of originalTransactionIds: [String], on transaction: DatabaseTransaction) async throws -> [String: String] {
        guard !originalTransactionIds.isEmpty else { return [:] }
        let rows = try await transaction.query(
            """
            SELECT t.id, COALESCE(p.history_anchor_transaction_id, t.id)
            FROM unnest(\(Array(Set(originalTransactionIds)))::text[]) AS t (id)
            LEFT JOIN purchases p ON p.bundle_id = \(bundleId) AND p.environment = \(environment) AND p.original_transaction_id = t.id
            """, logger: logger)
        var anchors: [String: String] = [:]
        for try await (purchase, anchor) in rows.decode((String, String).self) { anchors[purchase] = anchor }
        return anchors
    }

    /// Customers with a purchase that fell due by `due` (a window's end): a subscription Apple still counts as
    /// active, in billing retry or in grace whose expiry, renewal or grace period end came after it
    /// was last checked against its transaction history, or a purchase asked to be read again after
    /// a snapshot disagreed with a notification; with `all`, every customer.
    ///
    /// PostgreSQL keeps each purchase's next due time (`next_due_ms`, a generated column) under a
    /// partial index, so a quiet hour costs an index probe however many customers there are, and a
    /// customer checked after its subscription fell due is not due again until the next date. In
    /// a dry run the shadow copies win over the real rows.
    package func dueAnchors(by due: Timestamp, all: Bool, on transaction: DatabaseTransaction) async throws -> [String] {
        let rows = try await transaction.query(try dueAnchorsQuery(by: due, all: all), logger: logger)
        var anchors: [String] = []
        for try await anchor in rows.decode(String.self) { anchors.append(anchor) }
        return anchors
    }

    /// The plan PostgreSQL chooses for the due query of an hourly run (tests and the benchmark check it reads the index).
    func explainDueAnchors(by due: Timestamp, on transaction: DatabaseTransaction) async throws -> String {
        var query = try dueAnchorsQuery(by: due, all: false)
        query.sql = "EXPLAIN " + query.sql
        var plan: [String] = []
        for try await line in try await transaction.query(query, logger: logger).decode(String.self) { plan.append(line) }
        return plan.joined(separator: "\n")
    }

    private func dueAnchorsQuery(by dueBy: Timestamp, all: Bool) throws -> PostgresQuery {
        let app = "bundle_id = $3 AND environment = $1"
        let due = all ? app : "\(app) AND next_due_ms <= $2 AND COALESCE(last_signed_date_ms, 0) <= $2"
        let copies =
            shadow.map {
                """
                UNION ALL
                SELECT original_transaction_id, history_anchor_transaction_id FROM \($0.realSchemaIdentifier).purchases r WHERE \(due)
                  AND NOT EXISTS (SELECT 1 FROM purchases s WHERE (s.bundle_id, s.environment, s.original_transaction_id)
                                  = (r.bundle_id, r.environment, r.original_transaction_id))
                """
            } ?? ""
        let sql = """
            SELECT DISTINCT COALESCE(history_anchor_transaction_id, original_transaction_id) FROM (
                SELECT original_transaction_id, history_anchor_transaction_id FROM purchases WHERE \(due)
                \(copies)
            ) AS due ORDER BY 1
            """
        var bindings = PostgresBindings()
        bindings.append(environment)
        bindings.append(dueBy)
        bindings.append(bundleId)
        return PostgresQuery(unsafeSQL: sql, binds: bindings)
    }

    /// The stored Get Transaction History revision of a customer.
    package func revision(anchor: String, on transaction: DatabaseTransaction) async throws -> String? {
        try await shadow?.copyOnFirstTouch(purchases: [], notifications: [], anchors: [anchor], of: target, on: transaction, logger: logger)
        let rows = try await transaction.query(
            """
            SELECT revision FROM history_revisions
            WHERE bundle_id = \(bundleId) AND environment = \(environment) AND anchor_transaction_id = \(anchor)
            """, logger: logger)
        for try await revision in rows.decode(String.self) { return revision }
        return nil
    }

    /// Forgets a revision Apple refused (4000005), so the history is read from the start.
    package func dropRevision(anchor: String, on transaction: DatabaseTransaction) async throws {
        try await shadow?.copyOnFirstTouch(purchases: [], notifications: [], anchors: [anchor], of: target, on: transaction, logger: logger)
        try await transaction.query(
            """
            DELETE FROM history_revisions WHERE bundle_id = \(bundleId) AND environment = \(environment) AND anchor_transaction_id = \(anchor)
            """, logger: logger)
    }

    /// Records a customer's history as read up to `revision` at `checkedAt`: stores the
    /// revision, links the purchases it covers to the customer, and marks them checked. A revision
    /// stored under another of the customer's purchases is dropped: one customer, one revision.
    package func recordHistoryChecked(
        anchor: String, revision: String?, purchases originalTransactionIds: [String], checkedAt: Timestamp, on transaction: DatabaseTransaction
    ) async throws {
        for query in recordHistoryCheckedQueries(anchor: anchor, revision: revision, purchases: originalTransactionIds, checkedAt: checkedAt) {
            try await transaction.query(query, logger: logger)
        }
    }

    /// The statements of ``recordHistoryChecked(anchor:revision:purchases:checkedAt:on:)``, in order
    /// (the tests read their plans). Each finds its rows by index probes: the customer's purchases
    /// (those given, the anchor, and those already linked to it) are first gathered into one array
    /// that the key's index takes (an `OR` with a subquery cannot be an index condition, and made
    /// each customer's completion read the app's whole `history_revisions`).
    func recordHistoryCheckedQueries(
        anchor: String, revision: String?, purchases originalTransactionIds: [String], checkedAt: Timestamp
    ) -> [PostgresQuery] {
        let (bundleId, environment) = (bundleId, environment)
        var queries: [PostgresQuery] = [
            """
            DELETE FROM history_revisions
            WHERE bundle_id = \(bundleId) AND environment = \(environment) AND anchor_transaction_id <> \(anchor)
              AND anchor_transaction_id = ANY(ARRAY(
                  SELECT unnest(\(originalTransactionIds)::text[])
                  UNION
                  SELECT original_transaction_id FROM purchases
                  WHERE bundle_id = \(bundleId) AND environment = \(environment) AND history_anchor_transaction_id = \(anchor)))
            """
        ]
        if let revision {
            queries.append(
                """
                INSERT INTO history_revisions (bundle_id, environment, anchor_transaction_id, revision)
                VALUES (\(bundleId), \(environment), \(anchor), \(revision))
                ON CONFLICT (bundle_id, environment, anchor_transaction_id) DO UPDATE SET revision = EXCLUDED.revision, updated_at = now()
                """)
        }
        queries.append(
            """
            UPDATE purchases SET history_anchor_transaction_id = \(anchor), history_checked_at_ms = \(checkedAt)
            WHERE bundle_id = \(bundleId) AND environment = \(environment)
              AND original_transaction_id = ANY(ARRAY(
                  SELECT unnest(\(originalTransactionIds + [anchor])::text[])
                  UNION
                  SELECT original_transaction_id FROM purchases
                  WHERE bundle_id = \(bundleId) AND environment = \(environment) AND history_anchor_transaction_id = \(anchor)))
            """)
        return queries
    }
}
