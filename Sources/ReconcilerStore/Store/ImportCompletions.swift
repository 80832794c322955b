package import AppStoreServer
package import Logging
import PostgresNIO
package import ReconcilerDomain

/// The SQL of `import_completions`: which IDs of an import file are resolved, per app, environment
/// and ID, so a rerun skips them, and which customer (anchor) each named.
///
/// ```swift
/// let completions = ImportCompletions(logger: logger, bundleId: "com.example.app")
/// let done = try await database.transaction { try await completions.completion(.transactionId, id, environments: ["Production"], on: $0) }
/// ```
package struct ImportCompletions: Sendable {
    package let logger: Logger
    package let bundleId: String

    package init(logger: Logger, bundleId: String) {
        self.logger = logger
        self.bundleId = bundleId
    }

    /// Which column of the file named the customer.
    package enum IdKind: String, Sendable, Codable {
        case transactionId, orderId
    }

    /// How an ID was resolved.
    package enum Outcome: String, Sendable, Codable {
        /// The customer's history and statuses were applied.
        case read
        /// Apple knows no such ID in any environment tried.
        case notFound = "not_found"
    }

    package struct Completion: Sendable, Hashable {
        package var environment: AppStoreEnvironment
        package var outcome: Outcome
        package var anchor: String?
    }

    /// The completion of an ID in any of `environments`, if there is one.
    package func completion(
        _ kind: IdKind, _ id: String, environments: [AppStoreEnvironment], on transaction: DatabaseTransaction
    ) async throws -> Completion? {
        let rows = try await transaction.query(
            """
            SELECT environment, outcome, anchor_transaction_id FROM import_completions
            WHERE bundle_id = \(bundleId) AND environment = ANY(\(environments.map(\.rawValue))::text[]) AND id_kind = \(kind.rawValue) AND id = \(id)
            ORDER BY outcome = 'read' DESC LIMIT 1
            """, logger: logger)
        for try await (environment, outcome, anchor) in rows.decode((AppStoreEnvironment, String, String?).self) {
            guard let outcome = Outcome(rawValue: outcome) else {
                throw ReconcilerError(.unknownStoredValue, "import_completions.outcome \(outcome) is not a known outcome")
            }
            return Completion(environment: environment, outcome: outcome, anchor: anchor)
        }
        return nil
    }

    /// Which of `anchors` (customers in `environment`) an import read: in the run `runId`, or in
    /// any import when `runId` is `nil`.
    package func readAnchor(
        of anchors: [String], environment: AppStoreEnvironment, runId: Int64?, on transaction: DatabaseTransaction
    ) async throws -> String? {
        guard !anchors.isEmpty else { return nil }
        let rows = try await transaction.query(
            """
            SELECT anchor_transaction_id FROM import_completions
            WHERE bundle_id = \(bundleId) AND environment = \(environment) AND outcome = 'read'
              AND anchor_transaction_id = ANY(\(anchors)::text[]) AND (\(runId)::bigint IS NULL OR run_id = \(runId))
            LIMIT 1
            """, logger: logger)
        for try await anchor in rows.decode(String.self) { return anchor }
        return nil
    }

    /// Records an ID as resolved (again, with `--refresh`: the newest resolution wins).
    package func complete(
        _ kind: IdKind, _ id: String, environment: AppStoreEnvironment, outcome: Outcome, anchor: String?, runId: Int64,
        on transaction: DatabaseTransaction
    ) async throws {
        try await transaction.query(
            """
            INSERT INTO import_completions (bundle_id, environment, id_kind, id, outcome, anchor_transaction_id, run_id)
            VALUES (\(bundleId), \(environment), \(kind.rawValue), \(id), \(outcome.rawValue), \(anchor), \(runId))
            ON CONFLICT (bundle_id, environment, id_kind, id) DO UPDATE
            SET outcome = EXCLUDED.outcome, anchor_transaction_id = EXCLUDED.anchor_transaction_id, run_id = EXCLUDED.run_id,
                completed_at = now()
            """, logger: logger)
    }
}
