package import AppStoreServer
import Foundation
import Logging
import PostgresNIO
package import ReconcilerDomain
import ReconcilerShared

/// The shared request budget's tables: a lease row per live process that calls Apple for an app,
/// with what it declares (`api_processes.budget`: `{"Get Transaction History": {"appBudget": 40, "cap": 10}, ...}`,
/// the endpoints it calls), and the endpoints a 429 closed for all of them (`api_closures`). Each
/// operation is one short transaction.
///
/// ```swift
/// let budget = BudgetLedger(database: database)
/// let live = try await budget.renewBudgetLease(
///     app: AppTarget(bundleId: "com.example", environment: .production), process: ProcessIdentity.current, declaration: declaration,
///     duration: .seconds(10), announce: false)
/// ```
package struct BudgetLedger: Sendable {
    package let database: Database
    var logger: Logger { database.logger }

    package init(database: Database) {
        self.database = database
    }

    private func read<Result: Sendable>(_ body: @escaping @Sendable (DatabaseTransaction) async throws -> Result) async throws -> Result {
        try await database.transaction(body)
    }

    /// The channel processes `NOTIFY` when an endpoint is closed or the set of processes changes.
    package static let budgetChannel = "reconciler_budget"

    /// Registers or renews this process with what it declares (the endpoints it calls, each with
    /// the app's budget and its own cap) and returns what every live process declares, this one
    /// included, by process.
    package func renewBudgetLease(
        app: AppTarget, process: String, declaration: BudgetAllocation.Declaration, duration: Duration,
        announce: Bool
    ) async throws -> [String: BudgetAllocation.Declaration] {
        let declared = String(decoding: try JSONEncoder().encode(declaration), as: UTF8.self)
        let milliseconds = duration.milliseconds
        return try await read { [logger] transaction in
            try await transaction.query(
                """
                INSERT INTO api_processes (environment, bundle_id, process, budget, lease_until)
                VALUES (\(app.environment), \(app.bundleId), \(process), \(declared)::jsonb, now() + \(milliseconds) * interval '1 millisecond')
                ON CONFLICT (environment, bundle_id, process) DO UPDATE SET lease_until = EXCLUDED.lease_until, budget = EXCLUDED.budget
                """, logger: logger)
            try await transaction.query(
                """
                DELETE FROM api_processes WHERE environment = \(app.environment) AND bundle_id = \(app.bundleId) AND lease_until < now() - interval '1 minute'
                """, logger: logger)
            if announce { try await transaction.run("SELECT pg_notify(\(Self.budgetChannel), 'processes')", logger: logger) }
            let rows = try await transaction.query(
                """
                SELECT process, budget::text FROM api_processes
                WHERE environment = \(app.environment) AND bundle_id = \(app.bundleId) AND lease_until > now()
                """, logger: logger)
            var declarations: [String: BudgetAllocation.Declaration] = [:]
            for try await (process, text) in rows.decode((String, String).self) { declarations[process] = Self.declaration(text) }
            return declarations
        }
    }

    /// A stored declaration; a row of an earlier version (`{"Get Transaction History": 40, ...}`,
    /// the rate it spent at most on each endpoint) reads as that rate for budget and cap alike.
    package static func declaration(_ text: String) -> BudgetAllocation.Declaration {
        let data = Data(text.utf8)
        if let declaration = try? JSONDecoder().decode(BudgetAllocation.Declaration.self, from: data) { return declaration }
        let rates = (try? JSONDecoder().decode([String: Double].self, from: data)) ?? [:]
        return rates.mapValues { BudgetAllocation.Claim(appBudget: $0, cap: $0) }
    }

    /// Gives the budget lease up (the others' shares grow at their next renewal).
    package func releaseBudgetLease(app: AppTarget, process: String) async throws {
        try await read { [logger] transaction in
            try await transaction.query(
                """
                DELETE FROM api_processes WHERE environment = \(app.environment) AND bundle_id = \(app.bundleId) AND process = \(process)
                """, logger: logger)
            try await transaction.run("SELECT pg_notify(\(Self.budgetChannel), 'processes')", logger: logger)
        }
    }

    /// Closes an endpoint for every process of the app until `untilMilliseconds` (UNIX ms).
    package func closeEndpoint(app: AppTarget, endpoint: String, untilMilliseconds: Int64) async throws {
        try await read { [logger] transaction in
            try await transaction.query(
                """
                INSERT INTO api_closures AS c (environment, bundle_id, endpoint, closed_until_ms)
                VALUES (\(app.environment), \(app.bundleId), \(endpoint), \(untilMilliseconds))
                ON CONFLICT (environment, bundle_id, endpoint) DO UPDATE SET closed_until_ms = GREATEST(c.closed_until_ms, EXCLUDED.closed_until_ms)
                """, logger: logger)
            try await transaction.run("SELECT pg_notify(\(Self.budgetChannel), \("closed \(endpoint)"))", logger: logger)
        }
    }

    /// The endpoints closed now: endpoint name → until (UNIX ms).
    package func closedEndpoints(app: AppTarget, now: Int64) async throws -> [String: Int64] {
        try await read { [logger] transaction in
            let rows = try await transaction.query(
                """
                SELECT endpoint, closed_until_ms FROM api_closures
                WHERE environment = \(app.environment) AND bundle_id = \(app.bundleId) AND closed_until_ms > \(now)
                """, logger: logger)
            var closed: [String: Int64] = [:]
            for try await (endpoint, until) in rows.decode((String, Int64).self) { closed[endpoint] = until }
            return closed
        }
    }
}
