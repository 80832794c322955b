import Logging
import PostgresNIO
import ReconcilerDomain
import TestSupport
import Testing

@testable import Reconciler
@testable import ReconcilerStore

/// The live webhook looks up each batch's purchases by key. On a fresh database, before the first
/// ANALYZE, PostgreSQL has no statistics to tell the key's index from another that begins with
/// the same app columns; migration 0016 leaves the key the only index a lookup by key matches.
@Suite struct PurchaseLookupTests {
    @Test func purchasesAreLookedUpThroughTheirKeyBeforeTheFirstAnalyze() async throws {
        try await TestDatabase.with { db in
            let handler = try TestApp().handler(db)
            let logger = Logger(label: "test")
            let (keyScans, anchorScans, found) = try await db.database.transaction { transaction in
                // Purchases of the app, uncommitted: autovacuum cannot analyze what it cannot see.
                try await transaction.run(
                    """
                    INSERT INTO purchases (bundle_id, environment, original_transaction_id)
                    SELECT \(TestApp.bundleId), 'Production', (7000 + g)::text FROM generate_series(1, 3000) g
                    """, logger: logger)
                let states = try await handler.store.purchaseStates(["7005", "8500", "10001"], on: transaction)
                // Index scans this transaction made, per index (counted before the transaction ends).
                let rows = try await transaction.query(
                    """
                    SELECT pg_stat_get_xact_numscans('purchases_pkey'::regclass),
                           pg_stat_get_xact_numscans('purchases_history_anchor_idx'::regclass)
                    """, logger: logger)
                for try await (key, anchor) in rows.decode((Int64, Int64).self) { return (key, anchor, states.keys.sorted()) }
                return (0, 0, states.keys.sorted())
            }
            #expect(found == ["7005", "8500"])
            #expect(keyScans >= 1)
            #expect(anchorScans == 0, "the purchases were found by filtering the anchor index's rows of the app")
        }
    }
}
