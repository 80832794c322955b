import ArgumentParser
import Logging
import PostgresNIO
import Reconciler

struct DatabaseOptions: ParsableArguments {
    @Option(name: .customLong("database-url"),
            help: ArgumentHelp("PostgreSQL URL, postgres://user:password@host:5432/db (env DATABASE_URL).", valueName: "url"))
    var databaseURL: String?

    @Option(name: .long, help: ArgumentHelp("Most connections this process opens (default 20).", valueName: "n"))
    var maxConnections: Int = 20

    func settings() throws -> DatabaseSettings {
        guard let url = databaseURL ?? Env.value("DATABASE_URL") else {
            throw CommandError.configuration("no database: set DATABASE_URL or --database-url (postgres://user:password@host:5432/db)")
        }
        do {
            return try DatabaseSettings(url: url, maximumConnections: max(2, maxConnections))
        } catch {
            throw CommandError.configuration("\(error)")
        }
    }

    /// Runs `body` with a running `PostgresClient`, then shuts it down.
    func withClient<T: Sendable>(logger: Logger, _ body: (PostgresClient) async throws -> T) async throws -> T {
        let settings = try settings()
        let client = PostgresClient(configuration: settings.clientConfiguration, backgroundLogger: logger)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            defer { group.cancelAll() }
            do {
                return try await body(client)
            } catch let error as PSQLError {
                throw CommandError.configuration("database \(settings): \(error.briefDescription)")
            }
        }
    }
}
