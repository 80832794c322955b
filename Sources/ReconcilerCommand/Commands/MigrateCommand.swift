import AppStoreServer
import ArgumentParser
import Foundation
import Reconciler
import ReconcilerConfiguration
import ReconcilerDomain
import ReconcilerStore

struct MigrateCommand: AsyncParsableCommand, UsesAppsOptions {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Apply the database migrations (migrations/NNNN_*.sql, embedded in the binary).",
        discussion: """
            Each migration is applied once, in order, in its own transaction, and recorded with its \
            checksum in schema_migrations. It refuses to run when an applied file has changed (0013 was \
            rewritten in place: its first text's checksum is accepted). A migration's CREATE INDEX \
            CONCURRENTLY lines are built first, outside its transaction, while the tables stay writable. \
            Two migrate commands at once are safe: the second waits, then finds nothing to do.

            Migration 0013 names each stored row's app from its own signed data. Rows whose signed data \
            names none take the configured app when exactly one bundle id is configured (the configuration \
            file's, narrowed by --app, or APP_STORE_BUNDLE_ID); with several or none, such rows stop the \
            migration, which then changes nothing and says so.

              reconciler migrate            # apply what is pending
              reconciler migrate --status   # list migrations and when they were applied
            """)

    @OptionGroup var options: StoredDataOptions

    @Flag(name: .long, help: "Only list migrations and whether they are applied.")
    var status = false

    @Option(name: .long, help: ArgumentHelp("Read migrations from this directory instead of the embedded copy.", valueName: "dir"))
    var migrationsDir: String?

    func run() async throws {
        let logger = logging.makeLogger()
        let migrations = try migrationsDir.map { try Migration.load(directory: $0) } ?? Migration.embedded
        let migrator = Migrator(migrations: migrations, defaultBundleId: try defaultBundleId())
        try await database.withDatabase(logger: logger) { database in
            do {
                if status {
                    for entry in try await migrator.status(database) {
                        let applied = entry.appliedAt.map { "applied \(ISO8601DateFormatter().string(from: $0))" } ?? "pending"
                        print("\(entry.migration.fileName)  \(applied)")
                    }
                    return
                }
                let applied = try await migrator.migrate(database)
                if applied.isEmpty {
                    print("schema is current (\(migrations.count) migration\(migrations.count == 1 ? "" : "s") applied)")
                } else {
                    for migration in applied { print("applied \(migration.fileName)") }
                }
            }
        }
    }

    /// The bundle id for rows whose signed data names no app: the configured one, when exactly one is.
    private func defaultBundleId() throws -> String? {
        guard app.configurationFile != nil || app.resolvedBundleId != nil else { return nil }
        let bundleIds = Set(try app.targets(requireAppAppleId: false).map(\.app.bundleId))
        return bundleIds.count == 1 ? bundleIds.first : nil
    }
}
