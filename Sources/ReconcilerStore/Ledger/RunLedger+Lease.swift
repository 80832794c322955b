import AppStoreServer
import Foundation
import PostgresNIO
import ReconcilerDomain
import ReconcilerShared

/// The run lease: one row per app and environment that the running process renews. Times are the
/// database's (`now()`), so the processes' clocks never matter.
extension RunLedger {
    /// Who holds the run lease of an app and environment.
    struct LeaseHolder: Sendable, Hashable {
        var holder: String
        var runId: Int64?
        var leaseUntil: Date
    }

    /// Takes the lease unless a live holder has it (or `replacing`, a holder known to be dead);
    /// returns that holder otherwise.
    func acquireRunLease(
        app: AppTarget, holder: String, duration: Duration,
        replacing deadHolder: String? = nil
    ) async throws -> LeaseHolder? {
        let milliseconds = duration.milliseconds
        return try await read { [logger] transaction in
            let taken = try await transaction.query(
                """
                INSERT INTO run_leases AS l (environment, bundle_id, holder, lease_until)
                VALUES (\(app.environment), \(app.bundleId), \(holder), now() + \(milliseconds) * interval '1 millisecond')
                ON CONFLICT (environment, bundle_id) DO UPDATE SET holder = EXCLUDED.holder, run_id = NULL, acquired_at = now(),
                    lease_until = EXCLUDED.lease_until
                WHERE l.lease_until < now() OR l.holder = EXCLUDED.holder OR l.holder = \(deadHolder)
                RETURNING 1
                """, logger: logger)
            for try await _ in taken { return nil }
            let rows = try await transaction.query(
                """
                SELECT holder, run_id, lease_until FROM run_leases WHERE environment = \(app.environment) AND bundle_id = \(app.bundleId)
                """, logger: logger)
            for try await (holder, runId, until) in rows.decode((String, Int64?, Date).self) {
                return LeaseHolder(holder: holder, runId: runId, leaseUntil: until)
            }
            return LeaseHolder(holder: "unknown", runId: nil, leaseUntil: Date())
        }
    }

    /// Extends the lease; `false` when this holder no longer has it.
    func renewRunLease(app: AppTarget, holder: String, duration: Duration, runId: Int64?) async throws -> Bool {
        let milliseconds = duration.milliseconds
        return try await read { [logger] transaction in
            let rows = try await transaction.query(
                """
                UPDATE run_leases SET lease_until = now() + \(milliseconds) * interval '1 millisecond', run_id = COALESCE(\(runId), run_id)
                WHERE environment = \(app.environment) AND bundle_id = \(app.bundleId) AND holder = \(holder)
                RETURNING 1
                """, logger: logger)
            for try await _ in rows { return true }
            return false
        }
    }

    /// Gives the lease up.
    func releaseRunLease(app: AppTarget, holder: String) async throws {
        try await read { [logger] transaction in
            try await transaction.query(
                """
                DELETE FROM run_leases WHERE environment = \(app.environment) AND bundle_id = \(app.bundleId) AND holder = \(holder)
                """, logger: logger)
        }
    }
}
