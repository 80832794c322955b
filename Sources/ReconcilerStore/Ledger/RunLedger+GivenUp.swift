package import AppStoreServer
package import Foundation
import PostgresNIO
package import ReconcilerDomain
import ReconcilerShared

/// Customers and shards a run gave up on, so that its window can finish: the ones Apple refused
/// (a permanent failure) and the ones that failed in ``GiveUpPolicy/attempts`` attempts of their
/// run in a row. They are never retried; `reconciler rejections` lists them beside the quarantine
/// and acknowledges them, and an unacknowledged one keeps its gauge (and alert) up.
extension RunLedger {
    /// One customer or shard given up.
    package struct GivenUp: Sendable, Codable, Hashable {
        package enum Kind: String, Sendable, Codable, CaseIterable {
            /// A customer whose transaction history could not be read.
            case customer
            /// A shard of the notification history (`QUERY START/END`).
            case shard
        }

        package var runId: Int64
        package var kind: Kind
        /// The customer's transaction id, or the shard's query and range.
        package var subject: String
        package var failureKind: FailureKind
        /// The last error.
        package var reason: String
        /// The failures in a row that led to it.
        package var failures: Int
        package var givenUpAt: Date
        package var acknowledgedAt: Date?
        package var acknowledgedNote: String?
    }

    /// How a failed customer or shard is recorded: failed (the next attempt of the run retries it)
    /// or given up.
    package enum FailureOutcome: Sendable, Equatable {
        case failed(consecutiveFailures: Int)
        case givenUp(consecutiveFailures: Int)
    }

    /// The name a shard is given up under.
    package static func subject(of shard: ReplayPlanner.Shard) -> String {
        "\(shard.filter) \(shard.window)"
    }

    /// Records a given-up customer or shard (in the caller's transaction).
    func recordGivenUp(
        runId: Int64, kind: GivenUp.Kind, subject: String, failureKind: FailureKind, reason: String, failures: Int,
        on transaction: DatabaseTransaction
    ) async throws {
        try await transaction.query(
            """
            INSERT INTO given_up (run_id, environment, bundle_id, kind, subject, failure_kind, reason, failures)
            SELECT run_id, environment, bundle_id, \(kind.rawValue), \(subject), \(failureKind.rawValue), \(reason), \(failures)
            FROM reconcile_runs WHERE run_id = \(runId)
            ON CONFLICT (run_id, kind, subject) DO UPDATE SET failure_kind = EXCLUDED.failure_kind, reason = EXCLUDED.reason,
                failures = EXCLUDED.failures, given_up_at = now()
            """, logger: logger)
    }

    static let givenUpColumns = """
        run_id, kind, subject, failure_kind, reason, failures, given_up_at, acknowledged_at, acknowledged_note
        """

    private func givenUp(_ query: PostgresQuery) async throws -> [GivenUp] {
        try await read { [logger] transaction in
            var result: [GivenUp] = []
            let rows = try await transaction.query(query, logger: logger)
            for try await row in rows {
                let columns = NamedColumns(row)
                result.append(
                    GivenUp(
                        runId: try columns["run_id"], kind: try columns.stored("kind", of: "given_up"), subject: try columns["subject"],
                        failureKind: try columns.stored("failure_kind", of: "given_up"), reason: try columns["reason"],
                        failures: try columns["failures"], givenUpAt: try columns["given_up_at"], acknowledgedAt: try columns["acknowledged_at"],
                        acknowledgedNote: try columns["acknowledged_note"]))
            }
            return result
        }
    }

    /// What a run gave up on.
    package func givenUp(runId: Int64) async throws -> [GivenUp] {
        try await givenUp(
            "SELECT \(unescaped: Self.givenUpColumns) FROM given_up WHERE run_id = \(runId) ORDER BY kind, subject")
    }

    /// What the runs of an app and environment gave up on, oldest first; unacknowledged ones only unless `all`.
    package func givenUp(app: AppTarget, all: Bool) async throws -> [GivenUp] {
        try await givenUp(
            """
            SELECT \(unescaped: Self.givenUpColumns) FROM given_up
            WHERE environment = \(app.environment) AND bundle_id = \(app.bundleId) AND (\(all) OR acknowledged_at IS NULL)
            ORDER BY given_up_at, run_id, kind, subject
            """)
    }

    /// How many given-up customers and shards of an app and environment nobody acknowledged yet, by kind.
    package func unacknowledgedGivenUpCount(app: AppTarget) async throws -> [GivenUp.Kind: Int] {
        try await read { [logger] transaction in
            let rows = try await transaction.query(
                """
                SELECT kind, count(*) FROM given_up
                WHERE environment = \(app.environment) AND bundle_id = \(app.bundleId) AND acknowledged_at IS NULL GROUP BY kind
                """, logger: logger)
            var counts = Dictionary(uniqueKeysWithValues: GivenUp.Kind.allCases.map { ($0, 0) })
            for try await (kind, count) in rows.decode((String, Int).self) {
                counts[try ReconcilerError.stored(kind, in: "given_up.kind", as: GivenUp.Kind.self)] = count
            }
            return counts
        }
    }

    /// How many given-up customers or shards of an app and environment have `selector` as their
    /// subject (what ``acknowledgeGivenUp(_:runId:note:app:)`` would acknowledge).
    package func givenUpCount(matching selector: String, app: AppTarget) async throws -> Int {
        try await read { [logger] transaction in
            let rows = try await transaction.query(
                """
                SELECT count(*) FROM given_up WHERE environment = \(app.environment) AND bundle_id = \(app.bundleId) AND subject = \(selector)
                """, logger: logger)
            for try await count in rows.decode(Int.self) { return count }
            return 0
        }
    }

    /// Acknowledges the given-up customers or shards whose subject is `selector` (a customer's
    /// transaction id, or a shard's whole subject), optionally of one run; returns how many.
    package func acknowledgeGivenUp(_ selector: String, runId: Int64? = nil, note: String?, app: AppTarget) async throws -> Int {
        try await read { [logger] transaction in
            let rows = try await transaction.query(
                """
                UPDATE given_up SET acknowledged_at = COALESCE(acknowledged_at, now()), acknowledged_note = \(note)
                WHERE environment = \(app.environment) AND bundle_id = \(app.bundleId) AND subject = \(selector)
                  AND (\(runId)::bigint IS NULL OR run_id = \(runId))
                RETURNING 1
                """, logger: logger)
            var count = 0
            for try await _ in rows { count += 1 }
            return count
        }
    }
}

/// When a customer or shard that keeps failing is given up: after this many attempts of its run
/// in a row (each rerun of an unfinished window is one), so one broken customer cannot keep a
/// window, and the schedule's alerts, partial for ever.
package struct GiveUpPolicy: Sendable, Hashable, Codable {
    /// Failed attempts in a row before giving up; at least 1.
    package var attempts: Int

    package init(attempts: Int = Self.defaultAttempts) {
        self.attempts = max(attempts, 1)
    }

    /// Six hourly runs: long enough for Apple's own retryable errors to pass, short enough that a
    /// window stuck on one customer finishes the same day.
    static let defaultAttempts = 6

    /// Whether a failure of `kind` that makes `consecutiveFailures` in a row gives up.
    func givesUp(_ kind: FailureKind, consecutiveFailures: Int) -> Bool {
        kind == .permanent || consecutiveFailures >= attempts
    }
}
