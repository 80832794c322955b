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

    /// Migration 0009 turns the URLs a queue row or a run's options held into a target id and a
    /// redacted form, the same as the code makes them, so no URL secret stays at rest and the
    /// rows still match a forwarder configured with the same URL.
    @Test func migration0009KeepsTargetsAndNoURLSecrets() async throws {
        let urls = [
            "https://hooks:pw-secret@app.example.com:8443/apple/notifications?token=tok-secret#frag",
            "http://127.0.0.1:9000/notifications", "https://user@app.example.com/a@b?x=y", "http://[::1]:8080/hook?k=v",
            "https://app.example.com/hook#tok-secret",
        ]
        try await TestDatabase.with(migrate: false) { db in
            try await Migrator(migrations: Migration.embedded.filter { $0.version < 9 }).migrate(db.client, logger: TestDatabase.logger)
            for (index, url) in urls.enumerated() {
                let options = #"{"forwardTo": "\#(url)"}"#
                try await db.execute(
                    """
                    INSERT INTO reconcile_runs (kind, environment, bundle_id, window_start_ms, window_end_ms, status, phase, dry_run, options)
                    VALUES ('manual', 'Production', 'com.example', 0, 1, 'succeeded', 'done', false, \(options)::jsonb)
                    """)
                try await db.execute(
                    """
                    INSERT INTO forward_queue (notification_uuid, target_url, status, delivered_at)
                    VALUES (\("n-\(index)"), \(url), \(index == 0 ? "delivered" : "pending"), \(index == 0 ? Date() : nil))
                    """)
            }
            // The queue rows above name no stored notification: they take the one app the database served.
            try await Migrator(defaultBundleId: "com.example.app").migrate(db.client, logger: TestDatabase.logger)
            let targets = urls.map(ForwardingTarget.init(url:))
            let rows = try await db.strings("SELECT target_id || ' ' || target_redacted FROM forward_queue ORDER BY notification_uuid")
            #expect(rows == targets.map { "\($0.id) \($0.redacted)" })
            #expect(targets[0].redacted == "https://…@app.example.com:8443/apple/notifications?…")
            #expect(targets[2].redacted == "https://…@app.example.com/a@b?…")
            let options = try await db.strings("SELECT options::text FROM reconcile_runs ORDER BY run_id")
            let decoded = try options.map { try JSONDecoder().decode(RunOptions.self, from: Data($0.utf8)).forwardTo }
            #expect(decoded == targets)
            let everything = try await db.strings(
                "SELECT options::text FROM reconcile_runs UNION ALL SELECT row_to_json(q)::text FROM forward_queue q")
            #expect(everything.allSatisfy { !$0.contains("secret") }, "\(everything)")
            #expect(try await db.count("SELECT delivered FROM forward_queue_totals") == 1)
        }
    }
}
