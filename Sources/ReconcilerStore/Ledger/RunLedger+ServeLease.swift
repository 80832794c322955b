import Foundation
import PostgresNIO
import ReconcilerDomain
import ReconcilerShared

/// serve's leader lease: one row per kind of work no two replicas may do at once (time rows in the
/// feed, automatic consumption answers). The leader renews it every tick; a replica takes it only
/// once it ran out. Times are the database's (`now()`), so the replicas' clocks never matter.
extension RunLedger {
    /// Takes the lease `name` for `holder`, or renews it when `holder` has it; `false` when another
    /// holder's lease has not run out.
    package func holdServeLease(_ name: String, holder: String, duration: Duration) async throws -> Bool {
        let milliseconds = duration.milliseconds
        return try await read { [logger] transaction in
            let rows = try await transaction.query(
                """
                INSERT INTO serve_leases AS l (name, holder, lease_until)
                VALUES (\(name), \(holder), now() + \(milliseconds) * interval '1 millisecond')
                ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, lease_until = EXCLUDED.lease_until,
                    acquired_at = CASE WHEN l.holder = EXCLUDED.holder THEN l.acquired_at ELSE now() END
                WHERE l.lease_until < now() OR l.holder = EXCLUDED.holder
                RETURNING 1
                """, logger: logger)
            for try await _ in rows { return true }
            return false
        }
    }

    /// Gives the lease up, so another replica leads at its next tick.
    package func releaseServeLease(_ name: String, holder: String) async throws {
        try await read { [logger] transaction in
            try await transaction.query("DELETE FROM serve_leases WHERE name = \(name) AND holder = \(holder)", logger: logger)
        }
    }
}
