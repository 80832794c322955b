import Foundation
package import Logging
package import PostgresNIO
import Reconciler
package import ReconcilerStore
import Testing

/// A fresh, migrated database in the throwaway cluster of `jobs/dev/with-postgres`, dropped afterwards.
package struct TestDatabase {
    package let client: PostgresClient
    package let database: Database
    package let name: String
    package let url: String

    package struct MissingDatabase: Error, CustomStringConvertible {
        package var description: String {
            "DATABASE_URL is not set: run the tests as `jobs/dev/with-postgres swift test` (see README)"
        }
    }

    package static var logger: Logger {
        var logger = Logger(label: "test")
        // Errors only: the pool's "run() has not started yet" notice is noise in tests.
        logger.logLevel = .error
        return logger
    }

    package static func serverURL() throws -> String {
        guard let url = ProcessInfo.processInfo.environment["DATABASE_URL"], !url.isEmpty else { throw MissingDatabase() }
        return url
    }

    /// Runs `body` with a new database that has every migration applied (unless `migrate` is false).
    /// - Parameter server: the server's URL; by default the shared test server's (`DATABASE_URL`).
    package static func with<T: Sendable>(migrate: Bool = true, server: String? = nil, _ body: (TestDatabase) async throws -> T) async throws -> T {
        let serverURL = try server ?? serverURL()
        let name = "test_\(UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(16).lowercased())"
        let admin = PostgresClient(
            configuration: try DatabaseSettings(url: serverURL, maximumConnections: 2).clientConfiguration,
            backgroundLogger: logger)
        // The clients run in tasks of their own that are cancelled, not awaited, at the end: a full
        // run of the suite once hung after a test's body had returned, with every task waiting and no
        // connection open (most likely a client's `run()` not returning after cancellation), so no
        // test waits for a client to finish stopping. `DROP DATABASE ... WITH (FORCE)` ends any
        // connection still open.
        let runningAdmin = Task { await admin.run() }
        defer { runningAdmin.cancel() }
        try await admin.query("CREATE DATABASE \(unescaped: name)", logger: logger)
        var components = URLComponents(string: serverURL)!
        components.path = "/\(name)"
        let url = components.string!
        let client = PostgresClient(
            configuration: try DatabaseSettings(url: url, maximumConnections: 24).clientConfiguration,
            backgroundLogger: logger)
        let runningClient = Task { await client.run() }
        let result: Result<T, any Error>
        do {
            let database = Database(client: client, logger: logger)
            if migrate { try await Migrator().migrate(database) }
            let testDatabase = TestDatabase(client: client, database: database, name: name, url: url)
            result = .success(try await body(testDatabase))
        } catch {
            result = .failure(error)
        }
        runningClient.cancel()
        _ = try? await admin.query("DROP DATABASE IF EXISTS \(unescaped: name) WITH (FORCE)", logger: logger)
        return try result.get()
    }

    /// Runs a query and returns its first column as Int.
    package func count(_ query: PostgresQuery) async throws -> Int {
        let rows = try await client.query(query, logger: Self.logger)
        for try await value in rows.decode(Int.self) { return value }
        return 0
    }

    /// Runs a query and returns its first column as strings.
    package func strings(_ query: PostgresQuery) async throws -> [String] {
        var values: [String] = []
        for try await value in try await client.query(query, logger: Self.logger).decode(String.self) { values.append(value) }
        return values
    }

    /// The signed payloads of the notifications whose UUIDs `uuidQuery` selects, in its order, rebuilt
    /// from what is stored as forwarding and `verify-stored` rebuild them (pruned ones are left out).
    package func signedPayloads(_ uuidQuery: PostgresQuery) async throws -> [String] {
        let uuids = try await strings(uuidQuery)
        let payloads = try await database.transaction { transaction in
            try await NotificationLog(logger: Self.logger).storedPayloads(uuids, headers: HeaderBook(), on: transaction)
        }
        return uuids.compactMap { payloads[$0]?.jws }
    }

    /// Runs a statement.
    package func execute(_ query: PostgresQuery) async throws {
        try await client.query(query, logger: Self.logger)
    }

    /// A fingerprint of everything the state tables hold, to prove something changed nothing.
    package func stateFingerprint() async throws -> String {
        let rows = try await client.query(
            """
            SELECT md5(coalesce((SELECT string_agg(t::text, '|' ORDER BY notification_uuid) FROM notifications t), '')
                || coalesce((SELECT string_agg(t::text, '|' ORDER BY transaction_id) FROM transactions t), '')
                || coalesce((SELECT string_agg(t::text, '|' ORDER BY original_transaction_id) FROM purchases t), ''))
            """, logger: Self.logger)
        for try await value in rows.decode(String.self) { return value }
        return ""
    }
}
