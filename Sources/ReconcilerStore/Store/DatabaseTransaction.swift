import Logging
import PostgresNIO

/// One open transaction, handed to the body of ``Database/transaction(rollback:_:)``. The store's
/// and the ledger's operations take it, so the code around the store composes several of them in
/// one transaction (a replayed page and its checkpoint commit together) without seeing SQL or a
/// connection: only this module can open a transaction or reach the connection inside it.
///
/// ```swift
/// let changes = try await database.transaction { transaction in
///     try await store.lock(purchases: originals, on: transaction)
///     return try await store.write(transactions: rows, updates: [], before: [:], origin: origin, on: transaction)
/// }
/// ```
package struct DatabaseTransaction: Sendable {
    let connection: PostgresConnection

    init(_ connection: PostgresConnection) { self.connection = connection }

    @discardableResult
    func query(_ query: PostgresQuery, logger: Logger, file: String = #fileID, line: Int = #line) async throws -> PostgresRowSequence {
        try await connection.query(query, logger: logger, file: file, line: line)
    }

    /// Runs a statement whose rows are not needed (see `PostgresConnection.run`).
    func run(_ query: PostgresQuery, logger: Logger) async throws {
        try await connection.run(query, logger: logger)
    }
}

/// The payloads of the notifications a ``Database/listen(on:_:)`` body receives, in the order the
/// server sent them.
package struct DatabaseNotifications: AsyncSequence {
    package typealias Element = String
    let base: PostgresNotificationSequence

    package struct AsyncIterator: AsyncIteratorProtocol {
        var base: PostgresNotificationSequence.AsyncIterator
        package mutating func next() async throws -> String? { try await base.next()?.payload }
    }

    package func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: base.makeAsyncIterator()) }
}
