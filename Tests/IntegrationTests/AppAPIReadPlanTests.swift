import AppStoreServer
import PostgresNIO
import ReconcilerDomain
import ReconcilerShared
import ReconcilerStore
import TestSupport
import Testing

/// The app API's stored read probes each purchase it answers through the purchases' key, whatever
/// the key of the request: it never walks the app's purchases testing each against the lookup.
@Suite struct AppAPIReadPlanTests {
    static let app = AppTarget(bundleId: "com.example.plans", environment: .production)

    /// 300 purchases of two transactions each, a token on each latest one, no ANALYZE (a new
    /// deployment's tables, or a burst of purchases before autovacuum): the planner has no
    /// statistics to save a statement that is shaped badly.
    @Test func everyKeyProbesThePurchasesByTheirKey() async throws {
        try await TestDatabase.with { db in
            try await db.execute(
                """
                INSERT INTO purchases (original_transaction_id, bundle_id, environment, product_type, app_account_token, app_user_id)
                SELECT 'o' || i, \(Self.app.bundleId), 'Production', 'Auto-Renewable Subscription',
                       'aaaaaaaa-0000-0000-0000-' || lpad(i::text, 12, '0'), 'user' || i
                FROM generate_series(1, 300) AS i
                """)
            try await db.execute(
                """
                INSERT INTO transactions (transaction_id, original_transaction_id, bundle_id, environment, app_account_token, signed_date_ms, signed_transaction_info)
                SELECT 't' || i || '-' || k, 'o' || i, \(Self.app.bundleId), 'Production', 'aaaaaaaa-0000-0000-0000-' || lpad(i::text, 12, '0'),
                       1700000000000 + i, 'h.e30.s'
                FROM generate_series(1, 300) AS i, generate_series(1, 2) AS k
                """)
            let store = PurchaseStore(database: db.database, scope: AppScope(target: Self.app, entitlement: .init()))
            let keys: [PurchaseStore.PurchaseKey] = [
                .originalTransactionId("o150"), .transactionId("t150-2"), .transactionId("o150"),
                .appAccountToken("AAAAAAAA-0000-0000-0000-000000000150"), .appUserId("user150"),
            ]
            for key in keys {
                let query = try store.checkedPurchasesQuery(key)
                let plan = try await db.strings(PostgresQuery(unsafeSQL: "EXPLAIN " + query.sql, binds: query.binds))
                // The outer scan of purchases: found by an index condition on its key (or the user's index), never filtered in a loop.
                let outer = try #require(plan.firstIndex { $0.contains(" on purchases p ") }, "\(key): \(plan.joined(separator: "\n"))")
                let condition = plan[outer...].dropFirst().prefix { !$0.contains("->") }.joined(separator: " ")
                #expect(
                    (condition.contains("Index Cond") || condition.contains("Recheck Cond"))
                        && (condition.contains("original_transaction_id") || condition.contains("app_user_id")),
                    "\(key): \(plan.joined(separator: "\n"))")
                #expect(
                    !plan.contains { $0.contains("Join Filter") || $0.contains("Seq Scan on purchases p") }, "\(key): \(plan.joined(separator: "\n"))"
                )
                let found = try await store.checkedPurchases(key, in: db.database).map(\.state.originalTransactionId)
                #expect(found == ["o150"], "\(key)")
            }
        }
    }
}
