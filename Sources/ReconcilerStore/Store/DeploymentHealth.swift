package import Foundation
import Logging
import PostgresNIO
import ReconcilerDomain

/// What `reconciler doctor` reads of the database's own state: sessions left idle in a
/// transaction (they hold locks and keep old rows from being vacuumed) and the change feed's size.
/// Each read is one short transaction of its own.
package struct DeploymentHealth: Sendable {
    let database: Database
    var logger: Logger { database.logger }

    package init(database: Database) {
        self.database = database
    }

    /// Sessions on this database that are idle in a transaction.
    package struct IdleTransactions: Sendable, Hashable {
        /// Of this process's own role, idle in a transaction for longer than the threshold.
        package var ownRole: Int
        /// When the oldest of ``ownRole`` went idle.
        package var oldestOwnSince: Date?
        /// Of other roles, idle in a transaction for longer than the threshold, where visible.
        package var otherRoles: Int
        /// Sessions of other roles whose state this role may not see (no `pg_read_all_stats`).
        package var hidden: Int
    }

    /// The sessions of this database (not this one) idle in a transaction since before `longerThan`
    /// ago, judged by the database's clock.
    package func idleTransactions(longerThan threshold: Duration) async throws -> IdleTransactions {
        let milliseconds = threshold.components.seconds * 1000 + threshold.components.attoseconds / 1_000_000_000_000_000
        return try await database.transaction { [logger] transaction in
            let rows = try await transaction.query(
                """
                WITH idle AS (
                    SELECT usename = current_user AS own, state_change
                    FROM pg_stat_activity
                    WHERE datname = current_database() AND pid <> pg_backend_pid()
                      AND state IN ('idle in transaction', 'idle in transaction (aborted)')
                      AND state_change < now() - make_interval(secs => \(Double(milliseconds) / 1000))
                )
                SELECT (SELECT count(*)::int FROM idle WHERE own),
                       (SELECT min(state_change) FROM idle WHERE own),
                       (SELECT count(*)::int FROM idle WHERE NOT own),
                       (SELECT count(*)::int FROM pg_stat_activity
                        WHERE datname = current_database() AND pid <> pg_backend_pid() AND state IS NULL
                          AND query = '<insufficient privilege>')
                """, logger: logger)
            for try await (own, oldest, others, hidden) in rows.decode((Int, Date?, Int, Int).self) {
                return IdleTransactions(ownRole: own, oldestOwnSince: oldest, otherRoles: others, hidden: hidden)
            }
            return IdleTransactions(ownRole: 0, oldestOwnSince: nil, otherRoles: 0, hidden: 0)
        }
    }

    /// The change feed's size: its rows (counted while few, PostgreSQL's estimate beyond: never a
    /// count over a large table),
    /// its bytes on disk with its indexes, and its oldest change.
    package struct FeedSize: Sendable, Hashable {
        /// Exact below 100,000, PostgreSQL's estimate above.
        package var estimatedRows: Int64
        package var bytes: Int64
        package var oldestChange: Date?
        /// The database's clock when it was read.
        package var now: Date
    }

    package func feedSize() async throws -> FeedSize {
        try await database.transaction { [logger] transaction in
            let rows = try await transaction.query(
                """
                SELECT CASE WHEN c.reltuples < 100000 THEN (SELECT count(*) FROM purchase_changes) ELSE c.reltuples::bigint END,
                       pg_total_relation_size(c.oid),
                       (SELECT min(changed_at) FROM purchase_changes), now()
                FROM pg_class c WHERE c.oid = 'purchase_changes'::regclass
                """, logger: logger)
            for try await (estimate, bytes, oldest, now) in rows.decode((Int64, Int64, Date?, Date).self) {
                return FeedSize(estimatedRows: estimate, bytes: bytes, oldestChange: oldest, now: now)
            }
            throw ReconcilerError(.missingRow, "the change feed's table purchase_changes is missing")
        }
    }
}
