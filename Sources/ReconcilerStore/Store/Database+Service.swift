import AppStoreServer
import Foundation
package import Logging
import PostgresNIO
import ReconcilerDomain
import ReconcilerShared
import ServiceLifecycle

extension Database: Service {
    /// A database for `settings` whose PostgreSQL client the store makes and runs: run it as a
    /// service (``run()``) beside the work that uses it, so no caller handles the client.
    ///
    /// ```swift
    /// let database = try Database(settings: settings, logger: logger)
    /// let group = ServiceGroup(services: [database, server], logger: logger)
    /// ```
    ///
    /// `clientLogger` gets what the PostgreSQL client logs of its own (each connection it opens, each
    /// attempt that failed, with the client's raw errors): by default `logger`; a command gives it one
    /// that stays quiet unless asked, since ``transaction(rollback:_:)`` already says when the database is away.
    /// - Throws: ``DatabaseSettings/InvalidURL`` when the TLS settings do not load.
    package init(settings: DatabaseSettings, logger: Logger, clientLogger: Logger? = nil, configuration: Configuration = .init()) throws {
        var configuration = configuration
        configuration.name = settings.description
        configuration.dedicatedConnection = try settings.connectionConfiguration()
        self.init(
            pool: PostgresClient(configuration: settings.clientConfiguration, backgroundLogger: clientLogger ?? logger),
            start: ClientStart(started: false), logger: logger, configuration: configuration, shadow: nil)
    }

    /// Runs the connection pool until the task is cancelled or the service group shuts down.
    /// Run one copy: every copy (``with(unavailableTimeout:)``, ...) shares the one pool.
    package func run() async throws {
        await runPool()
    }

    /// Whether `error` came from the database (its server or a connection to it), not from the
    /// work around it: callers that must tell the two apart need not know PostgreSQL's errors.
    package static func isDatabaseFailure(_ error: any Error) -> Bool {
        error is PSQLError || (error as? ReconcilerError)?.code == .databaseUnavailable || isConnectionPoolError(error)
    }

    /// PostgresClient's pool refuses a lease with its own error type (a tripped circuit breaker
    /// after a minute of failed connections, a request cancelled at shutdown), declared in a module
    /// PostgresNIO does not re-export: it is recognised by that module's name.
    private static func isConnectionPoolError(_ error: any Error) -> Bool {
        String(reflecting: type(of: error)).hasPrefix("_ConnectionPoolModule.")
    }
}

extension Migrator {
    /// ``migrate(_:logger:)-(PostgresClient,_)`` on a ``Database``'s pool.
    @discardableResult
    package func migrate(_ database: Database) async throws -> [Migration] {
        try await migrate(database.client, logger: database.logger)
    }

    /// ``status(_:logger:)-(PostgresClient,_)`` on a ``Database``'s pool.
    package func status(_ database: Database) async throws -> [Status] {
        try await status(database.client, logger: database.logger)
    }

    /// ``requireCurrent(_:logger:)-(PostgresClient,_)`` on a ``Database``'s pool.
    package func requireCurrent(_ database: Database) async throws {
        try await requireCurrent(database.client, logger: database.logger)
    }
}

extension PurchaseStore {
    /// How many rows the notification path has written: notifications, change-feed rows and
    /// forwarding deliveries (for benchmarks and checks).
    package struct StoredRows: Sendable, Hashable {
        package var notifications: Int
        package var changes: Int
        package var forwards: Int
    }

    package func storedRows(in database: Database) async throws -> StoredRows {
        try await database.transaction { [logger] transaction in
            let rows = try await transaction.query(
                """
                SELECT (SELECT count(*) FROM notifications), (SELECT count(*) FROM purchase_changes), (SELECT count(*) FROM forward_queue)
                """, logger: logger)
            for try await (notifications, changes, forwards) in rows.decode((Int, Int, Int).self) {
                return StoredRows(notifications: notifications, changes: changes, forwards: forwards)
            }
            return StoredRows(notifications: 0, changes: 0, forwards: 0)
        }
    }
}
