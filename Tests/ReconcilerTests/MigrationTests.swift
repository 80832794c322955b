import Foundation
import PostgresNIO
import Reconciler
import Testing

@Suite struct MigrationTests {
    static let migrationsDirectory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("migrations").path

    @Test func theEmbeddedMigrationsAreTheFilesInMigrations() throws {
        let files = try Migration.load(directory: Self.migrationsDirectory)
        let embedded = Migration.embedded
        #expect(!files.isEmpty)
        #expect(files == embedded, "run jobs/dev/embed-migrations after editing migrations/")
    }

    @Test func migrateAppliesEachOnceEvenWhenRunConcurrently() async throws {
        try await TestDatabase.with(migrate: false) { db in
            let applied = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<4 { group.addTask { try await Migrator().migrate(db.client, logger: TestDatabase.logger).count } }
                return try await group.reduce(0, +)
            }
            let expected = Migration.embedded.count
            #expect(applied == expected)
            #expect(try await db.count("SELECT count(*) FROM schema_migrations") == expected)
            #expect(try await Migrator().migrate(db.client, logger: TestDatabase.logger).isEmpty)
            try await Migrator().requireCurrent(db.client, logger: TestDatabase.logger)
        }
    }

    @Test func aChangedAppliedMigrationIsRefused() async throws {
        try await TestDatabase.with(migrate: false) { db in
            let original = Migration(fileName: "0001_first.sql", sql: "CREATE TABLE first (id int);")
            try await Migrator(migrations: [original]).migrate(db.client, logger: TestDatabase.logger)
            let edited = Migration(fileName: "0001_first.sql", sql: "CREATE TABLE first (id bigint);")
            let error = await #expect(throws: Migrator.MigrationError.self) {
                try await Migrator(migrations: [edited, Migration(fileName: "0002_second.sql", sql: "CREATE TABLE second (id int);")])
                    .migrate(db.client, logger: TestDatabase.logger)
            }
            #expect(error?.description.contains("changed after it was applied") == true)
            #expect(try await db.count("SELECT count(*) FROM pg_tables WHERE tablename = 'second'") == 0)
            // A database that is ahead of this binary is refused too.
            await #expect(throws: Migrator.MigrationError.self) {
                try await Migrator(migrations: []).migrate(db.client, logger: TestDatabase.logger)
            }
        }
    }

    @Test func aFailingMigrationLeavesNothingBehind() async throws {
        try await TestDatabase.with(migrate: false) { db in
            let broken = Migration(fileName: "0001_broken.sql", sql: "CREATE TABLE half (id int);\nCREATE TABLE oops (id nosuchtype);")
            await #expect(throws: Migrator.MigrationError.self) {
                try await Migrator(migrations: [broken]).migrate(db.client, logger: TestDatabase.logger)
            }
            let halfTables = try await db.count("SELECT count(*) FROM pg_tables WHERE tablename = 'half'")
            let recorded = try await db.count("SELECT count(*) FROM schema_migrations")
            #expect(halfTables == 0)
            #expect(recorded == 0)
            await #expect(throws: Migrator.MigrationError.self) {
                try await Migrator(migrations: [broken]).requireCurrent(db.client, logger: TestDatabase.logger)
            }
        }
    }
}
