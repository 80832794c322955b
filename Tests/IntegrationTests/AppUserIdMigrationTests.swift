import Foundation
import PostgresNIO
import TestSupport
import Testing

@testable import ReconcilerStore

/// Migration 0023 (appUserId) on a database of the previous schema: the columns are added without
/// touching the rows, its indexes (on those columns) are built concurrently after its
/// transaction and valid, and an older binary's statements still work.
@Suite struct AppUserIdMigrationTests {
    @Test func migration0023AddsItsColumnsAndBuildsItsIndexesAfterItsTransaction() async throws {
        try await TestDatabase.with(migrate: false) { db in
            try await Migrator(migrations: Migration.embedded.filter { $0.version < 23 }).migrate(db.client, logger: TestDatabase.logger)
            try await db.execute(
                "INSERT INTO purchases (bundle_id, environment, original_transaction_id, product_id) VALUES ('com.example.one', 'Production', '2000000000000001', 'p')"
            )
            try await Migrator().migrate(db.client, logger: TestDatabase.logger)
            #expect(
                try await db.count(
                    "SELECT count(*) FROM information_schema.columns WHERE column_name = 'app_user_id' AND table_name IN ('purchases', 'purchase_changes')"
                ) == 2)
            #expect(
                try await db.count(
                    """
                    SELECT count(*) FROM pg_index WHERE indisvalid AND indexrelid IN (
                        to_regclass('purchases_app_user_idx'), to_regclass('purchases_app_transaction_user_idx'),
                        to_regclass('purchase_changes_app_user_idx'))
                    """) == 3)
            #expect(try await db.count("SELECT count(*) FROM purchases WHERE app_user_id IS NULL AND product_id = 'p'") == 1)
            // A statement of the binary before 0023 names only its own columns.
            try await db.execute(
                "INSERT INTO purchases (bundle_id, environment, original_transaction_id, product_id) VALUES ('com.example.one', 'Production', '2000000000000002', 'p')"
            )
            #expect(try await db.count("SELECT count(*) FROM purchases WHERE app_user_id IS NULL") == 2)
            // Applied once: a second migrate changes nothing.
            try await Migrator().migrate(db.client, logger: TestDatabase.logger)
            #expect(try await db.count("SELECT count(*) FROM schema_migrations WHERE file_name = '0023_app_user_ids.sql'") == 1)
        }
    }
}
