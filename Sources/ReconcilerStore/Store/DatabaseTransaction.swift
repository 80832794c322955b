import Logging
import PostgresNIO
import ReconcilerDomain

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
    /// Set when a prepared statement failed. postgres-nio keeps a failed preparation for the
    /// connection's life and its error does not say whether preparing or running failed, so
    /// ``Database`` closes the connection after any such failure rather than lend it again.
    let preparedStatementFailed = Locked(false)
    /// Whether this transaction plans without sequential scans yet (see ``PreparedSQL``).
    private let plansKeyLookups = Locked(false)

    /// Whether ``query(_:preparedAs:logger:)`` prepares (``Database/Configuration/preparedStatements``).
    let preparesStatements: Bool

    init(_ connection: PostgresConnection, preparesStatements: Bool = true) {
        self.connection = connection
        self.preparesStatements = preparesStatements
    }

    @discardableResult
    func query(_ query: PostgresQuery, logger: Logger, file: String = #fileID, line: Int = #line) async throws -> PostgresRowSequence {
        try await connection.query(query, logger: logger, file: file, line: line)
    }

    /// Runs a statement whose rows are not needed (see `PostgresConnection.run`).
    func run(_ query: PostgresQuery, logger: Logger) async throws {
        try await connection.run(query, logger: logger)
    }

    /// Runs `query` (whose text is `SQL.sql`) as the named prepared statement `SQL`: parsed once
    /// per connection, and planned once when PostgreSQL finds its generic plan no worse.
    func query<SQL: PreparedSQL>(
        _ query: PostgresQuery, preparedAs: SQL.Type, logger: Logger
    ) async throws -> AsyncThrowingMapSequence<PostgresRowSequence, PostgresRow> {
        assert(query.sql == SQL.sql, "\(SQL.self) was built with another text than its prepared one")
        guard preparesStatements else {
            // Unnamed, it is planned for its own values every time: no plan outlives the tables' sizes.
            return try await connection.query(query, logger: logger).map { row throws -> PostgresRow in row }
        }
        do {
            if !plansKeyLookups.withLock({ $0 }) {
                try await connection.query("SET LOCAL enable_seqscan = off", logger: logger)
                plansKeyLookups.withLock { $0 = true }
            }
            return try await connection.execute(PreparedQuery<SQL>(bindings: query.binds), logger: logger)
        } catch {
            preparedStatementFailed.withLock { $0 = true }
            throw error
        }
    }
}

/// A statement the live path sends with every batch, sent as a named prepared statement
/// (``DatabaseTransaction/query(_:preparedAs:logger:)``). Sent unnamed, as postgres-nio sends a
/// `PostgresQuery`, each is parsed and planned again on every call, which for the live path's
/// statements cost PostgreSQL more CPU than running them.
///
/// Each reads and writes rows by key. PostgreSQL keeps a prepared statement's generic plan for as
/// long as the connection lives, until a table it reads is next analyzed: planned while a fresh
/// database's tables were nearly empty, it scanned them whole for every batch until then (20,000
/// notifications for each lock, in the webhook bench). So a transaction that runs one plans
/// without sequential scans (`SET LOCAL enable_seqscan = off`, a cost, not a ban: a statement
/// with no other way still scans), from its first prepared statement to its end.
///
/// ```swift
/// enum CountSQL: PreparedSQL {
///     static let sql = "SELECT count(*) FROM purchases WHERE bundle_id = $1"
///     static let bindingTypes: [PostgresDataType] = [.text]
/// }
/// let rows = try await transaction.query(PostgresQuery(unsafeSQL: CountSQL.sql, binds: binds), preparedAs: CountSQL.self, logger: logger)
/// ```
protocol PreparedSQL {
    /// The statement's text, the same for every call.
    static var sql: String { get }
    /// The types of the values bound, in order, as postgres-nio binds them (`String` is `text`,
    /// `Int64` `int8`, `[String]` `text[]`, `nil` its wrapped type's); left to the server, a
    /// `$1::jsonb` would be read as `jsonb`, which a bound `String` is not.
    static var bindingTypes: [PostgresDataType] { get }
}

/// postgres-nio's form of a ``PreparedSQL``: one statement name per type.
private struct PreparedQuery<SQL: PreparedSQL>: PostgresPreparedStatement {
    static var name: String { "reconciler.\(SQL.self)" }
    static var sql: String { SQL.sql }
    static var bindingDataTypes: [PostgresDataType] { SQL.bindingTypes }

    let bindings: PostgresBindings

    func makeBindings() -> PostgresBindings { bindings }
    func decodeRow(_ row: PostgresRow) -> PostgresRow { row }
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
