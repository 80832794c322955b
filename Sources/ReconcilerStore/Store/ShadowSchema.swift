import AppStoreServer
import Foundation
package import Logging
import PostgresNIO

/// Where a dry run keeps the state it would have written: a schema of its own, keyed by the run,
/// with copies of the state tables. The first time a page touches a purchase (or a notification,
/// or a customer's revision) the real rows are copied in; from then on the run's transactions
/// put the shadow schema first on their `search_path`, so the handler and the gap fill read and
/// write the copies with exactly the SQL of a real run. A dry run therefore reports exactly the
/// changes the real run would make, page by page in short transactions, with flat memory, and
/// the real tables never change. The schema is dropped when the dry run ends.
///
/// ```swift
/// let shadow = try await ShadowSchema.create(runId: run.runId, on: database)
/// let handler = handler.shadowed(by: shadow)   // replays now write the copies
/// try await shadow.drop(on: database)
/// ```
package struct ShadowSchema: Sendable, Hashable {
    package let runId: Int64
    /// The schema that holds the real tables, found when the dry run starts.
    let realSchema: String
    /// The columns of `purchases` a copy writes: all but the ones PostgreSQL generates, which it
    /// computes in the copy as in the real table.
    var purchaseColumns = "*"

    /// The tables a dry run writes instead of the real ones.
    package static let tables = [
        "notifications", "transactions", "purchases", "history_revisions", "purchase_changes", "forward_queue", "jws_headers",
        "entitlement_instants",
    ]

    /// The shadow schema's name; made of the run id only, so it is safe to put into SQL.
    package var name: String { "reconciler_dry_run_\(runId)" }

    var realSchemaIdentifier: String { "\"" + realSchema.replacingOccurrences(of: "\"", with: "\"\"") + "\"" }

    /// Creates the shadow tables of a dry run (or finds them, for a resumed one).
    package static func create(runId: Int64, on database: Database) async throws -> ShadowSchema {
        try await database.transaction { transaction in
            var realSchema = "public"
            let rows = try await transaction.query(
                """
                SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = to_regclass('purchases')
                """, logger: database.logger)
            for try await name in rows.decode(String.self) { realSchema = name }
            var shadow = ShadowSchema(runId: runId, realSchema: realSchema)
            let columns = try await transaction.query(
                """
                SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) FROM pg_attribute
                WHERE attrelid = to_regclass('purchases') AND attnum > 0 AND NOT attisdropped AND attgenerated = ''
                """, logger: database.logger)
            for try await list in columns.decode(String.self) { shadow.purchaseColumns = list }
            try await transaction.query(PostgresQuery(unsafeSQL: "CREATE SCHEMA IF NOT EXISTS \(shadow.name)"), logger: database.logger)
            for table in tables {
                try await transaction.query(
                    PostgresQuery(
                        unsafeSQL: """
                            CREATE TABLE IF NOT EXISTS \(shadow.name).\(table) (LIKE \(shadow.realSchemaIdentifier).\(table) INCLUDING ALL)
                            """), logger: database.logger)
            }
            return shadow
        }
    }

    /// Drops the shadow tables.
    package func drop(on database: Database) async throws {
        try await database.shadowed(by: nil).transaction { transaction in
            _ = try await transaction.query(PostgresQuery(unsafeSQL: "DROP SCHEMA IF EXISTS \(name) CASCADE"), logger: database.logger)
        }
    }

    /// Drops the shadow schemas of dry runs that are not among `keep` (runs that can still resume).
    package static func dropAll(except keep: Set<Int64>, on database: Database) async throws {
        try await database.shadowed(by: nil).transaction { transaction in
            let rows = try await transaction.query(
                "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'reconciler\\_dry\\_run\\_%'", logger: database.logger)
            var stale: [String] = []
            for try await name in rows.decode(String.self) {
                guard let runId = Int64(name.dropFirst("reconciler_dry_run_".count)), !keep.contains(runId) else { continue }
                stale.append(name)
            }
            for name in stale {
                try await transaction.query(PostgresQuery(unsafeSQL: "DROP SCHEMA IF EXISTS \(name) CASCADE"), logger: database.logger)
            }
        }
    }

    /// Puts the shadow tables first for the rest of the transaction.
    package func enter(on transaction: DatabaseTransaction, logger: Logger) async throws {
        try await transaction.run(
            "SELECT set_config('search_path', \(name) || ', ' || current_setting('search_path'), true)", logger: logger)
    }

    /// Copies the real rows of purchases (with their transactions), notifications and customers
    /// into the shadow tables, unless the dry run already holds its own copies of them.
    func copyOnFirstTouch(
        purchases: [String], notifications: [String], anchors: [String], of target: AppTarget, on transaction: DatabaseTransaction,
        logger: Logger
    ) async throws {
        let real = realSchemaIdentifier
        let app = "bundle_id = $3 AND environment = $4"
        if !purchases.isEmpty || !anchors.isEmpty {
            var bindings = PostgresBindings()
            bindings.append(purchases)
            bindings.append(anchors)
            bindings.append(target.bundleId)
            bindings.append(target.environment.rawValue)
            try await transaction.query(
                PostgresQuery(
                    unsafeSQL: """
                        WITH touched AS (
                            INSERT INTO \(name).purchases (\(purchaseColumns)) SELECT \(purchaseColumns) FROM \(real).purchases
                            WHERE \(app) AND (original_transaction_id = ANY($1::text[]) OR original_transaction_id = ANY($2::text[])
                               OR history_anchor_transaction_id = ANY($2::text[]))
                            ON CONFLICT DO NOTHING
                            RETURNING original_transaction_id
                        )
                        INSERT INTO \(name).transactions SELECT * FROM \(real).transactions
                        WHERE \(app) AND original_transaction_id IN (SELECT original_transaction_id FROM touched)
                        ON CONFLICT DO NOTHING
                        """, binds: bindings), logger: logger)
        }
        // Notification UUIDs are unique across apps; a customer's revision is keyed by its app too.
        try await copy("notifications", where: "notification_uuid", in: notifications, on: transaction, logger: logger)
        try await copy("history_revisions", where: "anchor_transaction_id", in: anchors, of: target, on: transaction, logger: logger)
    }

    /// Copies the real rows whose `key` is one of `values` (of `target`'s app and environment,
    /// when given), unless the shadow table has them.
    private func copy(
        _ table: String, where key: String, in values: [String], of target: AppTarget? = nil, on transaction: DatabaseTransaction,
        logger: Logger
    ) async throws {
        guard !values.isEmpty else { return }
        var bindings = PostgresBindings()
        bindings.append(values)
        var app = ""
        if let target {
            bindings.append(target.bundleId)
            bindings.append(target.environment.rawValue)
            app = "bundle_id = $2 AND environment = $3 AND "
        }
        try await transaction.query(
            PostgresQuery(
                unsafeSQL: """
                    INSERT INTO \(name).\(table) SELECT * FROM \(realSchemaIdentifier).\(table) WHERE \(app)\(key) = ANY($1::text[])
                    ON CONFLICT DO NOTHING
                    """, binds: bindings), logger: logger)
    }
}
