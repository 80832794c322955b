import Foundation
package import Logging
package import PostgresNIO
import ReconcilerDomain
import ReconcilerShared
import Synchronization

/// Runs work in short PostgreSQL transactions on a `PostgresClient`, and rides out a database
/// that goes away for a while (a restart, a failover): a lost connection or a server that is
/// starting up makes the whole transaction run again, until `unavailableTimeout` has passed
/// without success; then a ``ReconcilerError`` with ``ReconcilerError/Code/databaseUnavailable`` names the database (never its password).
///
/// ```swift
/// let database = Database(client: client, logger: logger, configuration: .init(name: settings.description))
/// let count = try await database.transaction { transaction in try await store.count(on: transaction) }
/// ```
///
/// Every body must be safe to run again: a commit whose answer was lost is retried like any other
/// failure, so writes are idempotent or guarded by a compare-and-set that tells "already done".
package struct Database: Sendable {
    package struct Configuration: Sendable {
        /// Names the database in errors and logs: host, port and database, never a password.
        package var name: String
        /// How long one operation keeps retrying while the database is unreachable.
        package var unavailableTimeout: Duration
        /// One attempt (connection lease and statements) running longer is abandoned and retried.
        var attemptTimeout: Duration
        /// Whether the live path's statements are named prepared statements (``PreparedSQL``): off
        /// for a pool that cannot keep them (PgBouncer in transaction mode before 1.21, or with
        /// `max_prepared_statements = 0`), which then gets each statement unnamed, planned each time.
        package var preparedStatements: Bool
        /// How to open a connection outside the pool for `LISTEN` (`nil`: borrow one from the pool,
        /// as tests do).
        /// (Set by ``Database/init(settings:logger:configuration:)`` from the settings.)
        var dedicatedConnection: PostgresConnection.Configuration? = nil

        package init(
            name: String = "the database", unavailableTimeout: Duration = .seconds(60), attemptTimeout: Duration = .seconds(30),
            preparedStatements: Bool = true
        ) {
            self.name = name
            self.unavailableTimeout = unavailableTimeout
            self.attemptTimeout = attemptTimeout
            self.preparedStatements = preparedStatements
        }
    }

    /// The pool; use ``client``, which waits until the pool runs.
    private let pool: PostgresClient
    /// Shared by every copy of this database (``with(unavailableTimeout:)``, ``shadowed(by:)``, ...).
    let start: ClientStart
    package let logger: Logger
    package let configuration: Configuration
    /// Set for a dry run: every transaction reads and writes the run's shadow tables first.
    package let shadow: ShadowSchema?
    /// The JWS headers this process has seen stored (``storeHeaders(of:)``).
    let storedHeaders: StoredHeaders

    /// A database on a client its caller runs (tests); ``init(settings:logger:configuration:)``
    /// makes one the database runs itself (``run()``).
    package init(client: PostgresClient, logger: Logger, configuration: Configuration = .init()) {
        self.init(pool: client, start: ClientStart(started: true), logger: logger, configuration: configuration, shadow: nil)
    }

    init(
        pool: PostgresClient, start: ClientStart, logger: Logger, configuration: Configuration, shadow: ShadowSchema?,
        storedHeaders: StoredHeaders = StoredHeaders()
    ) {
        self.pool = pool
        self.start = start
        self.logger = logger
        self.configuration = configuration
        self.shadow = shadow
        self.storedHeaders = storedHeaders
    }

    /// The same database, seen through a dry run's shadow tables (which hold headers of their own).
    package func shadowed(by shadow: ShadowSchema?) -> Database {
        Database(
            pool: pool, start: start, logger: logger, configuration: configuration, shadow: shadow,
            storedHeaders: shadow == self.shadow ? storedHeaders : StoredHeaders())
    }

    /// The PostgreSQL client, once it runs (``ClientStart``).
    var client: PostgresClient {
        get async {
            await start.wait()
            return pool
        }
    }

    /// Runs the client as this database's service needs it (``run()``).
    func runPool() async {
        // The waiters are released only once `run()` has marked the client running (its first
        // line, before it first suspends, which an immediate child task runs on this thread before
        // `addImmediateTask` returns): released before the call, a waiter on the other core could
        // lease before that line ran, and PostgresNIO warned that `run()` had not been called.
        // This relies on `run()` being nonisolated, like this function: were either ever isolated
        // to an actor, the call could suspend before that first line (DatabaseTests would show it
        // under load).
        await withDiscardingTaskGroup { group in
            group.addImmediateTask { await self.pool.run() }
            start.markStarted()
        }
    }

    /// The same database, giving up sooner while it is unreachable (for work that must not wait long).
    package func with(unavailableTimeout: Duration) -> Database {
        var configuration = configuration
        configuration.unavailableTimeout = unavailableTimeout
        configuration.attemptTimeout = min(configuration.attemptTimeout, unavailableTimeout)
        return Database(pool: pool, start: start, logger: logger, configuration: configuration, shadow: shadow, storedHeaders: storedHeaders)
    }

    /// Runs `body` in one transaction on one connection: committed when it returns, rolled back
    /// when it throws, or when `rollback` is true. A deadlock, a serialization failure or a lost
    /// connection runs the whole body again.
    package func transaction<Result: Sendable>(
        rollback: Bool = false, _ body: @escaping @Sendable (DatabaseTransaction) async throws -> Result
    ) async throws -> Result {
        try await retrying { [logger, configuration, shadow] connection in
            try await connection.query("BEGIN", logger: logger)
            let transaction = DatabaseTransaction(connection, preparesStatements: configuration.preparedStatements)
            do {
                if let shadow { try await shadow.enter(on: transaction, logger: logger) }
                let result = try await body(transaction)
                try await connection.query(rollback ? "ROLLBACK" : "COMMIT", logger: logger)
                return result
            } catch {
                _ = try? await connection.query("ROLLBACK", logger: logger)
                // A preparation that failed (say, in a transaction already aborted) would fail every
                // later use of the statement on this connection: the pool opens a new one instead.
                if transaction.preparedStatementFailed.withLock({ $0 }) { try? await connection.close() }
                throw error
            }
        }
    }

    /// Runs one read-only statement outside an explicit transaction, and `read` on its rows: the
    /// statement is its own transaction, so it reads one consistent snapshot in one round trip
    /// (BEGIN, the statement and COMMIT in ``transaction(rollback:_:)`` are three). Retried as a
    /// transaction is. Seen through a dry run's shadow tables it runs in a transaction, which
    /// enters them first.
    func readStatement<Result: Sendable>(
        _ query: PostgresQuery, _ read: @escaping @Sendable (PostgresRowSequence) async throws -> Result
    ) async throws -> Result {
        guard shadow == nil else {
            return try await transaction { [logger] transaction in try await read(try await transaction.query(query, logger: logger)) }
        }
        return try await retrying { [logger] connection in try await read(try await connection.query(query, logger: logger)) }
    }

    /// Runs `body` on a pooled connection, again on a new attempt when it fails as
    /// ``transaction(rollback:_:)`` says (a conflict, a database that is away), each attempt
    /// bounded by `attemptTimeout`.
    private func retrying<Result: Sendable>(
        _ body: @escaping @Sendable (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        let clock = ContinuousClock()
        let deadline = clock.now + configuration.unavailableTimeout
        var attempt = 0
        while true {
            attempt += 1
            // Errors before the body ran come from getting a connection: the server is away.
            let leased = Locked(false)
            do {
                return try await withAttemptTimeout {
                    try await client.withConnection { connection in
                        leased.withLock { $0 = true }
                        return try await body(connection)
                    }
                }
            } catch {
                try Task.checkCancellation()
                guard let retry = leased.withLock({ $0 }) ? Self.retryKind(of: error) : .unavailable else { throw error }
                if retry == .conflict, attempt < 5 {
                    logger.debug("retrying a transaction after a conflict", metadata: ["error": "\(Self.brief(error))"])
                    continue
                }
                guard retry == .unavailable, clock.now < deadline else {
                    throw retry == .unavailable
                        ? ReconcilerError(
                            .databaseUnavailable,
                            "\(configuration.name) was unreachable for \(configuration.unavailableTimeout.components.seconds) s (\(Self.brief(error)))"
                        )
                        : error
                }
                let pause = min(Duration.milliseconds(100 * (1 << min(attempt, 5))), .seconds(2))
                logger.warning(
                    "the database is unreachable; retrying",
                    metadata: [
                        "database": "\(configuration.name)", "attempt": "\(attempt)", "error": "\(Self.brief(error))",
                    ])
                try await Task.sleep(for: min(pause, max(deadline - clock.now, .milliseconds(1))))
            }
        }
    }

    /// Runs `body` with the notifications sent on `channel`, on a connection of its own outside the
    /// pool (a listener holds its session for as long as it listens, so it must not take a pooled
    /// connection that transactions wait for). Ends when `body` returns or the connection fails.
    ///
    /// ```swift
    /// try await database.listen(on: PurchaseStore.changeChannel) { notifications in
    ///     for try await _ in notifications { await wakeup.signal() }
    /// }
    /// ```
    package func listen<Result: Sendable>(
        on channel: String, _ body: @Sendable (DatabaseNotifications) async throws -> Result
    ) async throws -> Result {
        guard let dedicated = configuration.dedicatedConnection else {
            return try await client.withConnection { connection in
                try await connection.listen(on: channel) { try await body(DatabaseNotifications(base: $0)) }
            }
        }
        let connection = try await PostgresConnection.connect(
            configuration: dedicated, id: Self.listenerIDs.add(1, ordering: .relaxed).newValue,
            logger: logger)
        do {
            let result = try await connection.listen(on: channel) { try await body(DatabaseNotifications(base: $0)) }
            try? await connection.close()
            return result
        } catch {
            try? await connection.close()
            throw error
        }
    }

    private static let listenerIDs = Atomic<Int>(1_000_000)

    /// Whether the database answers within `timeout`, for health checks.
    package func isReachable(within timeout: Duration = .seconds(2)) async -> Bool {
        (try? await with(unavailableTimeout: timeout).transaction { [logger] connection in
            try await connection.run("SELECT 1", logger: logger)
            return true
        }) ?? false
    }

    /// Runs one attempt, abandoning it when it takes longer than `attemptTimeout`: it is cancelled
    /// and not waited for, because a statement in flight on a connection whose server vanished may
    /// never answer cancellation, and the caller must still give up in bounded time. The deadline
    /// is kept by ``AttemptWatchdog``, not by a sleeping task per attempt.
    private func withAttemptTimeout<Result: Sendable>(_ body: @escaping @Sendable () async throws -> Result) async throws -> Result {
        let outcome = AttemptOutcome<Result>()
        let watch = AttemptWatchdog.shared.watch(timeout: configuration.attemptTimeout) {
            if outcome.finish(.failure(AttemptTimedOut())) { outcome.cancelAttempt() }
        }
        outcome.attach(
            Task {
                let result: Swift.Result<Result, any Error>
                do { result = .success(try await body()) } catch { result = .failure(error) }
                AttemptWatchdog.shared.unwatch(watch)
                outcome.finish(result)
            })
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in outcome.wait(continuation) }
        } onCancel: {
            // The attempt stops where it can; the watchdog still bounds the wait.
            outcome.cancelAttempt()
        }
    }

    /// The first of an attempt's result, its timeout and its caller's cancellation.
    private final class AttemptOutcome<Result: Sendable>: Sendable {
        private let state = Mutex<(continuation: CheckedContinuation<Result, any Error>?, early: Swift.Result<Result, any Error>?, done: Bool)>(
            (nil, nil, false))
        /// The attempt's task, and whether it was to be cancelled before it was attached.
        private let attempt = Mutex<(task: Task<Void, Never>?, cancelled: Bool)>((nil, false))

        func attach(_ task: Task<Void, Never>) {
            let cancelled = attempt.withLock { attempt in
                attempt.task = task
                return attempt.cancelled
            }
            if cancelled { task.cancel() }
        }

        func cancelAttempt() {
            let task = attempt.withLock { attempt in
                attempt.cancelled = true
                return attempt.task
            }
            task?.cancel()
        }

        func wait(_ continuation: CheckedContinuation<Result, any Error>) {
            let early: Swift.Result<Result, any Error>? = state.withLock { state in
                if let early = state.early { return early }
                state.continuation = continuation
                return nil
            }
            if let early { continuation.resume(with: early) }
        }

        /// Resumes the caller unless something else did first; `true` when this did.
        @discardableResult
        func finish(_ result: Swift.Result<Result, any Error>) -> Bool {
            let continuation: CheckedContinuation<Result, any Error>?? = state.withLock { state in
                guard !state.done else { return .none }
                state.done = true
                guard let continuation = state.continuation else {
                    state.early = result
                    return .some(nil)
                }
                state.continuation = nil
                return .some(continuation)
            }
            guard case .some(let waiting) = continuation else { return false }
            waiting?.resume(with: result)
            return true
        }
    }

    struct AttemptTimedOut: Error {}

    enum RetryKind { case conflict, unavailable }

    /// Whether the store retries a failure like this one (a connection gone, a conflict): what it
    /// retried and still failed passes, and a rerun resumes.
    package static func isRetried(_ error: any Error) -> Bool { retryKind(of: error) != nil }

    /// Which failures run a transaction again: conflicts a few times, and everything that says
    /// the server or the connection is gone until the database has been unavailable for too long.
    static func retryKind(of error: any Error) -> RetryKind? {
        if error is CancellationError { return nil }
        if error is AttemptTimedOut { return .unavailable }
        if let transaction = error as? PostgresTransactionError {
            return transaction.closureError.flatMap(retryKind(of:)) ?? .unavailable
        }
        guard let error = error as? PSQLError else { return nil }
        switch error.code {
        case .serverClosedConnection, .connectionError, .uncleanShutdown, .clientClosedConnection:
            return .unavailable
        case .server:
            let state = error.serverInfo?[.sqlState] ?? ""
            if state == "40001" || state == "40P01" { return .conflict }
            // 08: connection exception; 57P01-57P03: shutdown, crash, starting up; 53300: too many connections.
            if state.hasPrefix("08") || ["57P01", "57P02", "57P03", "53300"].contains(state) { return .unavailable }
            return nil
        default:
            return nil
        }
    }

    static func brief(_ error: any Error) -> String {
        (error as? PSQLError)?.briefDescription ?? String(describing: type(of: error))
    }

    /// What an error of a store operation says to an operator, for a log line: the database's
    /// own message, or the failure's kind; never a query, a bind value or a connection secret.
    /// The webhook and the metrics log store failures through this, knowing nothing of PostgreSQL.
    package static func operatorDescription(of error: any Error) -> String {
        switch error {
        case let error as ReconcilerError where error.code == .databaseUnavailable: error.description
        case let error as ReconcilerError: "\(error.code): \(error.description)"
        default: brief(error)
        }
    }
}

/// A `Database` printed anywhere (a log line, ServiceLifecycle's list of the services that hold
/// one, `dump`) shows only its name: its configuration holds the listener's connection settings,
/// password included.
extension Database: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    package var description: String { "Database(\(configuration.name))" }
    package var debugDescription: String { description }
    package var customMirror: Mirror { Mirror(self, children: ["name": configuration.name]) }
}

extension Database.Configuration: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    package var description: String {
        "Database.Configuration(\(name), unavailableTimeout: \(unavailableTimeout), attemptTimeout: \(attemptTimeout), "
            + "preparedStatements: \(preparedStatements), dedicatedConnection: \(dedicatedConnection == nil ? "none" : "***"))"
    }
    package var debugDescription: String { description }
    package var customMirror: Mirror { Mirror(self, children: ["description": description]) }
}

extension PSQLError {
    /// The server's message, or the error's kind, without the query text or bind values.
    var briefDescription: String {
        if let message = serverInfo?[.message] {
            return "\(message) (SQLSTATE \(serverInfo?[.sqlState] ?? "?"))"
        }
        return "\(code)"
    }
}

extension PostgresConnection {
    /// Runs a statement whose rows are not needed, and reads them anyway: a statement that returns
    /// rows reports its error while they are read, and an error left unread would turn the
    /// transaction's COMMIT into a silent rollback.
    func run(_ query: PostgresQuery, logger: Logger) async throws {
        for try await _ in try await self.query(query, logger: logger) {}
    }
}
