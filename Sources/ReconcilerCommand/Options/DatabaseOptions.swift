import AppStoreServer
import ArgumentParser
import Logging
import Reconciler
import ReconcilerDomain
import ReconcilerShared
import ReconcilerStore

struct DatabaseOptions: ParsableArguments {
    @Option(
        name: .customLong("database-url"),
        help: ArgumentHelp("PostgreSQL URL, postgres://user:password@host:5432/db (env DATABASE_URL).", valueName: "url"))
    var databaseURL: String?

    @Option(name: .long, help: ArgumentHelp("Most connections this process opens.", valueName: "n"))
    var maxConnections: Int = 20

    @Option(
        name: .long,
        help: ArgumentHelp(
            "How long to wait for an unreachable database (at start, and after a restart or a failover) before giving up.",
            valueName: "duration"))
    var databaseTimeout: Duration = .seconds(10)

    func settings() throws -> DatabaseSettings {
        guard let url = databaseURL ?? Env.value("DATABASE_URL") else {
            throw ReconcilerError.configuration("no database: set DATABASE_URL or --database-url (postgres://user:password@host:5432/db)")
        }
        do {
            return try DatabaseSettings(url: url, maximumConnections: max(2, maxConnections))
        } catch {
            throw ReconcilerError.configuration("\(error)")
        }
    }

    /// DATABASE_PREPARED_STATEMENTS: `on` (the default) or `off`, for a pool that cannot keep named
    /// prepared statements (PgBouncer in transaction mode before 1.21, or with `max_prepared_statements = 0`).
    static func preparedStatements() throws -> Bool {
        switch Env.value("DATABASE_PREPARED_STATEMENTS")?.lowercased() {
        case nil, "on", "true", "1": return true
        case "off", "false", "0": return false
        case let other?:
            throw ReconcilerError.configuration("DATABASE_PREPARED_STATEMENTS is \"\(other)\": use on or off")
        }
    }

    /// The ``Database`` settings every command shares: the name errors show, a connection of its own
    /// for listeners, prepared statements or not. (Each app's rule for `entitled` comes with its
    /// ``AppScope``, not with the database.)
    /// It waits `unavailableTimeout` for a database that is away (by default `--database-timeout`); the
    /// PostgreSQL client's own messages show only with `--verbose` (``LoggingOptions/databaseClientLogger(_:)``).
    func database(_ settings: DatabaseSettings, logger: Logger, unavailableTimeout: Duration? = nil) throws -> Database {
        let configuration = Database.Configuration(
            unavailableTimeout: unavailableTimeout ?? databaseTimeout, preparedStatements: try Self.preparedStatements())
        do {
            return try Database(
                settings: settings, logger: logger, clientLogger: LoggingOptions.databaseClientLogger(logger), configuration: configuration)
        } catch {
            throw ReconcilerError.configuration("database \(settings): the TLS settings do not load: \(error)")
        }
    }

    /// Runs a batch command's `work` (a run, a worker) with a ``Database`` whose schema is this
    /// version's (checked first, ``CommandLifecycle``) and that rides out restarts
    /// for `--database-timeout`, as a service beside the PostgreSQL client: SIGTERM or SIGINT stop
    /// the work at a checkpoint, then the client (``CommandLifecycle``).
    ///
    /// With `sharing`, the work's App Store client spends a request budget shared with every
    /// process of the app and environment (``SharedBudget``). `interrupted` says what a signal that
    /// stopped the work means for the command (``CommandLifecycle/interruption``).
    func runWork<T: Sendable>(
        logger: Logger, sharing: [BudgetSharing] = [], interrupted: ReconcilerError = .interruption, stopsGracefully: Bool = false,
        _ work: @escaping @Sendable (Database) async throws -> T
    ) async throws -> T {
        let settings = try settings()
        // A signal while it waits for the database ends it as one during the work does.
        guard try await untilSignalled({ try await checkConnection(settings, logger: logger) }) != nil else {
            throw interrupted
        }
        let database = try self.database(settings, logger: logger)
        // One shared budget per app and environment the work calls Apple for (Apple limits each app apart).
        let budgets = sharing.map { api in
            SharedBudget(
                configuration: .init(claims: api.budget.claims(api.endpoints)), database: database, limiter: api.client.rateLimiter,
                app: api.target)
        }
        let lifecycle = CommandLifecycle(
            database: database, logger: logger, budgets: budgets, interruption: interrupted, workStopsGracefully: stopsGracefully)
        return try await lifecycle.run {
            try await work(database)
        }
    }

    /// The `--database-url` and `DATABASE_URL` values on the command line and in the environment, whether or
    /// not they parse, for scrubbing secrets from the last error message.
    static func connectionStrings(arguments: [String] = CommandLine.arguments) -> [String] {
        var strings = Env.value("DATABASE_URL").map { [$0] } ?? []
        for (index, argument) in arguments.enumerated() {
            if argument == "--database-url", index + 1 < arguments.count { strings.append(arguments[index + 1]) }
            if argument.hasPrefix("--database-url=") { strings.append(String(argument.dropFirst("--database-url=".count))) }
        }
        return strings
    }

    /// Runs `work` that calls Apple sharing the app's request budget when a database is configured
    /// (DATABASE_URL or --database-url); without one it runs alone, with the app's budget (capped
    /// by --rate-limit).
    func sharingBudgetIfConfigured<T: Sendable>(
        logger: Logger, sharing: [BudgetSharing], interrupted: ReconcilerError = .interruption, _ work: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        guard databaseURL ?? Env.value("DATABASE_URL") != nil else { return try await work() }
        return try await runWork(logger: logger, sharing: sharing, interrupted: interrupted) { _ in try await work() }
    }

    /// Runs a short command's `body` with a ``Database`` (no signal handling: it has nothing to resume),
    /// once ``checkConnection(_:logger:)`` could connect.
    func withDatabase<T: Sendable>(logger: Logger, _ body: (Database) async throws -> T) async throws -> T {
        let settings = try settings()
        try await checkConnection(settings, logger: logger)
        let database = try self.database(settings, logger: logger)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await database.run() }
            defer { group.cancelAll() }
            return try await body(database)
        }
    }

    /// ``withDatabase(logger:_:)`` once the schema is this version's (``Migrator/requireCurrent(_:)``):
    /// what every command that reads or writes the reconciler's tables does first.
    func withCurrentSchema<T: Sendable>(logger: Logger, _ body: (Database) async throws -> T) async throws -> T {
        try await withDatabase(logger: logger) { database in
            try await Migrator().requireCurrent(database)
            return try await body(database)
        }
    }

    /// Connects once before the command's work, so that a database it cannot use ends the command
    /// within `--database-timeout`, in one line naming the host, the port and the cause (the client's
    /// own errors only with `--verbose`): a host name that does not resolve, a login or TLS refused
    /// exit 1 at once; a connection still refused or unanswered after the timeout exits 2.
    func checkConnection(_ settings: DatabaseSettings, logger: Logger) async throws {
        guard databaseTimeout >= .seconds(1) else {
            throw ReconcilerError.configuration("--database-timeout: \(databaseTimeout.operatorText) is shorter than 1s")
        }
        try await settings.checkConnection(within: databaseTimeout, logger: LoggingOptions.databaseClientLogger(logger))
    }
}

/// What a command that calls Apple shares with the app's other processes (``SharedBudget``): its
/// client's limiter, the app's budget with its own cap, and the endpoints it calls, so that an
/// endpoint's budget is divided only among the processes that call it.
struct BudgetSharing {
    var client: AppStoreServerAPIClient
    var target: AppTarget
    var budget: RequestBudget
    var endpoints: [AppStoreServerAPIEndpoint]
}
