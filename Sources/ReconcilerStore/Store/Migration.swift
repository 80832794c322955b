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
    /// Checksums of earlier texts of this file that a database may have recorded: accepted as this
    /// one. Only for a file rewritten in place that leaves the same schema as before (see
    /// ``rewrittenInPlace``).
    let formerChecksums: Set<String>
    /// The file's `CREATE [UNIQUE] INDEX CONCURRENTLY IF NOT EXISTS name ON ...;` lines, which cannot
    /// run in a transaction: the migrator runs each on its own before the migration's transaction,
    /// while the tables stay writable. The transaction must not rely on them (a build can fail or be
    /// interrupted, leaving an invalid index): it builds what is missing itself.
    let concurrentIndexes: [ConcurrentIndex]
    /// The SQL run in the migration's transaction: the file without ``concurrentIndexes``.
    let transactionSQL: String

    /// A `CREATE INDEX CONCURRENTLY` line of a migration.
    struct ConcurrentIndex: Sendable, Hashable {
        /// The index's name (unqualified, unquoted).
        let name: String
        let statement: String
    }

    /// Files rewritten in place, by version: the checksums of their earlier texts. 0013 rebuilt
    /// the keys first, then filled purchases and revisions with a subquery per row that no index
    /// served any more (hours at a million purchases, the live webhook held meanwhile); its rewrite
    /// leaves the same schema (MigrationTests compares them).
    static let rewrittenInPlace: [Int: Set<String>] = [
        13: ["a6a70bd9a1f5b76551296967c246e9ab6919edaee9ccdc7f5d73beadbd58d9a0"]
    ]

    package init(fileName: String, sql: String, formerChecksums: Set<String>? = nil) {
        self.fileName = fileName
        let version = Int(fileName.prefix(while: \.isNumber)) ?? -1
        self.version = version
        var trimmed = Substring(sql)
        while trimmed.last?.isNewline == true { trimmed = trimmed.dropLast() }
        self.sql = String(trimmed)
        self.checksum = SHA256Hex.digest(self.sql)
        self.formerChecksums = formerChecksums ?? Self.rewrittenInPlace[version] ?? []
        var concurrentIndexes: [ConcurrentIndex] = []
        var transactionLines: [Substring] = []
        for line in self.sql.split(separator: "\n", omittingEmptySubsequences: false) {
            if let index = ConcurrentIndex(line: line) {
                concurrentIndexes.append(index)
            } else {
                transactionLines.append(line)
            }
        }
        self.concurrentIndexes = concurrentIndexes
        self.transactionSQL = transactionLines.joined(separator: "\n")
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

    static let lockKey: (Int32, Int32) = (727_001, 1)

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
        var fileName: String
        var checksum: String
        var appliedAt: Date
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
            guard migration.checksum == record.checksum || migration.formerChecksums.contains(record.checksum) else {
                throw ReconcilerError(
                    .schemaNotCurrent,
                    "\(migration.fileName) changed after it was applied (applied checksum \(record.checksum.prefix(12)), file \(migration.checksum.prefix(12))): restore the file and put the change in a new migration"
                )
            }
        }
    }

    /// Applies one migration in a transaction of its own unless it is applied already; `true`
    /// when this call applied it. Its concurrent indexes are built first, outside any transaction;
    /// one on a column the migration itself adds is built right after it, concurrently too.
    private func apply(_ migration: Migration, client: PostgresClient, logger: Logger) async throws -> Bool {
        var waiting: [Migration.ConcurrentIndex] = []
        if !migration.concurrentIndexes.isEmpty {
            let pending = try await inTransaction(client: client, logger: logger) { connection in
                let applied = try await appliedMigrations(on: connection, logger: logger)
                try checkApplied(applied)
                return applied[migration.version] == nil
            }
            if pending { waiting = await buildConcurrentIndexes(migration.concurrentIndexes, client: client, logger: logger) }
        }
        let applied = try await applyInTransaction(migration, client: client, logger: logger)
        if applied, !waiting.isEmpty {
            _ = await buildConcurrentIndexes(waiting, client: client, logger: logger, afterTheMigration: true)
        }
        return applied
    }

    private func applyInTransaction(_ migration: Migration, client: PostgresClient, logger: Logger) async throws -> Bool {
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
                try await connection.run("SELECT pg_temp.reconciler_run_migration(\(migration.transactionSQL))", logger: logger)
            } catch let error as PSQLError where Self.isDeadlock(error) {
                // Rolled back and run again (``inTransaction(client:logger:_:)``).
                throw error
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

    /// Builds a migration's concurrent indexes, each as a statement of its own (PostgreSQL refuses
    /// `CREATE INDEX CONCURRENTLY` in a transaction), while the tables stay writable. An index left
    /// invalid by an interrupted build, and not being built now by another migrator, is dropped
    /// first. A failure is logged, not thrown: the migration's transaction builds what is missing.
    /// An index on a column the migration adds (SQLSTATE 42703 before it) is returned, to be built
    /// after the migration (`afterTheMigration`), whose failure names the statement to run by hand.
    private func buildConcurrentIndexes(
        _ indexes: [Migration.ConcurrentIndex], client: PostgresClient, logger: Logger, afterTheMigration: Bool = false
    ) async -> [Migration.ConcurrentIndex] {
        var waiting: [Migration.ConcurrentIndex] = []
        for index in indexes {
            // The index names its migration's work well enough: `migrate` prints each migration's
            // name once, when it is applied.
            let metadata: Logger.Metadata = ["index": "\(index.name)"]
            do {
                try await client.withConnection { connection in
                    let leftover =
                        try await connection.query(
                            """
                            SELECT count(*) FROM pg_index
                            WHERE indexrelid = to_regclass(\(index.name)) AND NOT indisvalid
                              AND NOT EXISTS (SELECT FROM pg_stat_progress_create_index WHERE index_relid = to_regclass(\(index.name)))
                            """, logger: logger
                        ).collect().first?.decode(Int.self) ?? 0
                    if leftover > 0 {
                        logger.info("dropping an index an interrupted build left invalid", metadata: metadata)
                        try await connection.query(PostgresQuery(unsafeSQL: "DROP INDEX CONCURRENTLY IF EXISTS \(index.name)"), logger: logger)
                    }
                    logger.info("building an index before the migration, without holding its table", metadata: metadata)
                    try await connection.query(PostgresQuery(unsafeSQL: index.statement), logger: logger)
                }
            } catch let error as PSQLError where !afterTheMigration && error.serverInfo?[.sqlState] == "42703" {
                logger.debug("the index is on a column the migration adds: built after it", metadata: metadata)
                waiting.append(index)
            } catch {
                var failed = metadata
                failed["error"] = "\(String(reflecting: error))"
                if afterTheMigration {
                    failed["statement"] = "\(index.statement)"
                    logger.warning("building the index concurrently after the migration failed: run the statement by hand", metadata: failed)
                } else {
                    logger.warning("building the index concurrently failed: the migration builds it, holding its table", metadata: failed)
                }
            }
        }
        return waiting
    }

    /// Runs `body` in a transaction that holds the migration lock: concurrent migrators take turns.
    /// A transaction PostgreSQL ends as a deadlock's victim runs again: a migrator waiting for the
    /// lock, one holding it and a third building an index concurrently (which waits for both their
    /// transactions) can wait on each other, and the victim's turn simply comes again.
    private func inTransaction<Result>(
        client: PostgresClient, logger: Logger,
        _ body: (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        var attempt = 1
        while true {
            do {
                return try await client.withConnection { connection in
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
            } catch let error as PSQLError where Self.isDeadlock(error) && attempt < 5 {
                attempt += 1
                logger.info("a concurrent migrator's work deadlocked with this one's; taking the turn again")
            }
        }
    }

    /// PostgreSQL's `deadlock_detected`.
    private static func isDeadlock(_ error: PSQLError) -> Bool { error.serverInfo?[.sqlState] == "40P01" }
}

extension Migration.ConcurrentIndex {
    /// Reads a line `CREATE [UNIQUE] INDEX CONCURRENTLY IF NOT EXISTS name ON ...;` (a plain name);
    /// `nil` for any other line.
    init?(line: Substring) {
        let prefixes = ["CREATE INDEX CONCURRENTLY IF NOT EXISTS ", "CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS "]
        guard line.hasSuffix(";"), let prefix = prefixes.first(where: { line.hasPrefix($0) }) else { return nil }
        let rest = line.dropFirst(prefix.count)
        let name = rest.prefix { $0 == "_" || ($0.isASCII && ($0.isLetter || $0.isNumber)) }
        guard !name.isEmpty, rest.dropFirst(name.count).hasPrefix(" ON ") else { return nil }
        self.init(name: String(name), statement: String(line.dropLast()))
    }
}
