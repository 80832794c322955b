import Crypto
package import Foundation
import Logging
import PostgresNIO
import ReconcilerDomain

/// One numbered SQL file of `migrations/`.
package struct Migration: Sendable, Hashable {
    package let version: Int
    package let fileName: String
    package let sql: String
    /// SHA-256 of the SQL (trailing newlines ignored), recorded when applied.
    package let checksum: String

    package init(fileName: String, sql: String) {
        self.fileName = fileName
        self.version = Int(fileName.prefix(while: \.isNumber)) ?? -1
        var trimmed = Substring(sql)
        while trimmed.last?.isNewline == true { trimmed = trimmed.dropLast() }
        self.sql = String(trimmed)
        self.checksum = SHA256Hex.digest(self.sql)
    }

    /// Loads `NNNN_*.sql` files from a directory, in order.
    package static func load(directory: String) throws -> [Migration] {
        let names = try FileManager.default.contentsOfDirectory(atPath: directory)
            .filter { $0.hasSuffix(".sql") && $0.prefix(4).allSatisfy(\.isNumber) && $0.dropFirst(4).first == "_" }
            .sorted()
        return try names.map { name in
            Migration(fileName: name, sql: try String(contentsOfFile: "\(directory)/\(name)", encoding: .utf8))
        }
    }
}

/// Applies migrations: in order, each once, each in its own transaction, recorded with its
/// checksum. It refuses to run when an applied file has changed or the database has a migration
/// this binary does not know, and it is safe to run from several processes at once: each
/// migration's transaction takes a transaction-scoped advisory lock, so a second process waits,
/// then finds it applied. (No session state: it works through PgBouncer's transaction mode.)
///
/// ```swift
/// let applied = try await Migrator(migrations: Migration.embedded).migrate(client, logger: logger)
/// ```
package struct Migrator: Sendable {
    package let migrations: [Migration]
    /// The one app a database from before apps were told apart served: rows whose signed data
    /// names no app take it (migration 0013). `nil` when the configuration names no app or several;
    /// the migration then stops if such rows exist.
    package var defaultBundleId: String?

    package init(migrations: [Migration] = Migration.embedded, defaultBundleId: String? = nil) {
        self.migrations = migrations.sorted { $0.version < $1.version }
        self.defaultBundleId = defaultBundleId
    }

    /// The state of one migration in a database.
    package struct Status: Sendable {
        package var migration: Migration
        package var appliedAt: Date?
    }

    package static let lockKey: (Int32, Int32) = (727_001, 1)

    /// Applies what is pending and returns it.
    @discardableResult
    func migrate(_ client: PostgresClient, logger: Logger) async throws -> [Migration] {
        try validateVersions()
        try await inTransaction(client: client, logger: logger) { connection in
            try await connection.query(
                """
                CREATE TABLE IF NOT EXISTS schema_migrations (
                    version    integer PRIMARY KEY,
                    file_name  text NOT NULL,
                    checksum   text NOT NULL,
                    applied_at timestamptz NOT NULL DEFAULT now()
                )
                """, logger: logger)
            try checkApplied(try await appliedMigrations(on: connection, logger: logger))
        }
        var applied: [Migration] = []
        for migration in migrations {
            if try await apply(migration, client: client, logger: logger) { applied.append(migration) }
        }
        return applied
    }

    /// Which migrations are applied, without changing anything. Throws like ``migrate(_:logger:)``
    /// when an applied file has changed.
    func status(_ client: PostgresClient, logger: Logger) async throws -> [Status] {
        try validateVersions()
        return try await client.withConnection { connection in
            let applied = try await appliedMigrations(on: connection, logger: logger)
            try checkApplied(applied)
            return migrations.map { Status(migration: $0, appliedAt: applied[$0.version]?.appliedAt) }
        }
    }

    /// Throws with a message naming the command to run when the database is not migrated.
    func requireCurrent(_ client: PostgresClient, logger: Logger) async throws {
        let pending = try await status(client, logger: logger).filter { $0.appliedAt == nil }
        guard pending.isEmpty else {
            throw ReconcilerError(
                .schemaNotCurrent,
                "the database schema is not current (pending: \(pending.map(\.migration.fileName).joined(separator: ", "))): run `reconciler migrate` first"
            )
        }
    }

    private func validateVersions() throws {
        var seen = Set<Int>()
        for migration in migrations {
            guard migration.version >= 0 else { throw ReconcilerError(.schemaNotCurrent, "\(migration.fileName) does not start with a number") }
            guard seen.insert(migration.version).inserted else {
                throw ReconcilerError(.schemaNotCurrent, "two migrations have version \(migration.version)")
            }
        }
    }

    private struct AppliedMigration {
        package var fileName: String
        package var checksum: String
        package var appliedAt: Date
    }

    private func appliedMigrations(on connection: PostgresConnection, logger: Logger) async throws -> [Int: AppliedMigration] {
        let exists =
            try await connection.query("SELECT to_regclass('schema_migrations') IS NOT NULL", logger: logger)
            .collect().first?.decode(Bool.self) ?? false
        guard exists else { return [:] }
        var result: [Int: AppliedMigration] = [:]
        let rows = try await connection.query("SELECT version, file_name, checksum, applied_at FROM schema_migrations", logger: logger)
        for try await (version, fileName, checksum, appliedAt) in rows.decode((Int, String, String, Date).self) {
            result[version] = AppliedMigration(fileName: fileName, checksum: checksum, appliedAt: appliedAt)
        }
        return result
    }

    private func checkApplied(_ applied: [Int: AppliedMigration]) throws {
        let known = Dictionary(uniqueKeysWithValues: migrations.map { ($0.version, $0) })
        for (version, record) in applied.sorted(by: { $0.key < $1.key }) {
            guard let migration = known[version] else {
                throw ReconcilerError(
                    .schemaNotCurrent,
                    "the database has migration \(record.fileName), which this reconciler does not know: use the reconciler version that applied it, or newer"
                )
            }
            guard migration.checksum == record.checksum else {
                throw ReconcilerError(
                    .schemaNotCurrent,
                    "\(migration.fileName) changed after it was applied (applied checksum \(record.checksum.prefix(12)), file \(migration.checksum.prefix(12))): restore the file and put the change in a new migration"
                )
            }
        }
    }

    /// Applies one migration in a transaction of its own unless it is applied already; `true`
    /// when this call applied it.
    private func apply(_ migration: Migration, client: PostgresClient, logger: Logger) async throws -> Bool {
        try await inTransaction(client: client, logger: logger) { connection in
            let applied = try await appliedMigrations(on: connection, logger: logger)
            try checkApplied(applied)
            guard applied[migration.version] == nil else { return false }
            logger.debug("applying migration", metadata: ["migration": "\(migration.fileName)"])
            // The extended query protocol runs one statement per query; PL/pgSQL's EXECUTE runs a
            // whole file, and the SQL travels as a bound parameter, never pasted into a statement.
            try await connection.query(
                """
                CREATE OR REPLACE FUNCTION pg_temp.reconciler_run_migration(sql text) RETURNS void
                LANGUAGE plpgsql AS $$ BEGIN EXECUTE sql; END $$
                """, logger: logger)
            try await connection.run("SELECT set_config('reconciler.bundle_id', \(defaultBundleId ?? ""), true)", logger: logger)
            do {
                try await connection.run("SELECT pg_temp.reconciler_run_migration(\(migration.sql))", logger: logger)
            } catch let error as PSQLError where error.serverInfo?[.message] != nil {
                // The server's own message says what is wrong (a RAISE in the migration names what to do).
                throw ReconcilerError(.schemaNotCurrent, "\(migration.fileName) failed and was rolled back: \(error.serverInfo?[.message] ?? "")")
            } catch {
                throw ReconcilerError(.schemaNotCurrent, "\(migration.fileName) failed and was rolled back: \(String(reflecting: error))")
            }
            try await connection.query(
                """
                INSERT INTO schema_migrations (version, file_name, checksum)
                VALUES (\(migration.version), \(migration.fileName), \(migration.checksum))
                """, logger: logger)
            return true
        }
    }

    /// Runs `body` in a transaction that holds the migration lock: concurrent migrators take turns.
    private func inTransaction<Result>(
        client: PostgresClient, logger: Logger,
        _ body: (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        try await client.withConnection { connection in
            try await connection.query("BEGIN", logger: logger)
            do {
                try await connection.run("SELECT pg_advisory_xact_lock(\(Self.lockKey.0), \(Self.lockKey.1))", logger: logger)
                let result = try await body(connection)
                try await connection.query("COMMIT", logger: logger)
                return result
            } catch {
                _ = try? await connection.query("ROLLBACK", logger: logger)
                throw error
            }
        }
    }
}
