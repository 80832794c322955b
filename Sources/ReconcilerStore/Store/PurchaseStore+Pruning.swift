package import Foundation
import PostgresNIO
import ReconcilerDomain

/// One kind of row `reconciler prune` removes, each by its own age. A part is one case here, its
/// statement in the store (``PurchaseStore/prune(_:before:limit:dryRun:on:)``), and one option of
/// the command: more parts (payloads, finished runs' rows, acknowledged quarantine) are added the
/// same way.
package enum PrunePart: String, Sendable, CaseIterable {
    /// Change-feed rows recorded before the cutoff, by the feed's prefix rule
    /// (``PurchaseStore/pruneChanges(before:limit:dryRun:on:)``).
    case changes
    /// Forwarding rows the app acknowledged (status `delivered`) before the cutoff; pending and
    /// failed deliveries are never pruned.
    case deliveredForwards

    /// The youngest age a part accepts: one hour, so a bare number (read as milliseconds) cannot
    /// empty a table.
    package static let minimumAge: Duration = .seconds(3600)

    /// What the part removes and its age means, as the command prints it after a count:
    /// `pruned 12 changes recorded before 2026-10-26T06:30:04Z`.
    package func describe(cutoff: Date) -> String {
        switch self {
        case .changes: "changes recorded before \(cutoff.formatted(.iso8601))"
        case .deliveredForwards: "delivered forwarding rows (delivered before \(cutoff.formatted(.iso8601)))"
        }
    }
}

extension PurchaseStore {
    /// Deletes up to `limit` rows of `part` older than `cutoff` (`nil`: no limit) and returns how
    /// many; with `dryRun`, the same statement deletes nothing and returns how many it would.
    package func prune(_ part: PrunePart, before cutoff: Date, limit: Int?, dryRun: Bool, on transaction: DatabaseTransaction) async throws -> Int {
        switch part {
        case .changes: try await pruneChanges(before: cutoff, limit: limit, dryRun: dryRun, on: transaction)
        case .deliveredForwards: try await pruneDeliveredForwards(before: cutoff, limit: limit, dryRun: dryRun, on: transaction)
        }
    }

    /// Deletes up to `limit` delivered forwarding rows delivered before `cutoff`, oldest first
    /// (through the partial index on `delivered_at`); the delivered counter follows by trigger.
    package func pruneDeliveredForwards(before cutoff: Date, limit: Int?, dryRun: Bool, on transaction: DatabaseTransaction) async throws -> Int {
        let rows = try await transaction.query(Self.pruneDeliveredForwardsQuery(before: cutoff, limit: limit, dryRun: dryRun), logger: logger)
        for try await count in rows.decode(Int.self) { return count }
        return 0
    }

    static func pruneDeliveredForwardsQuery(before cutoff: Date, limit: Int?, dryRun: Bool) -> PostgresQuery {
        """
        WITH doomed AS (
            SELECT notification_uuid, target_id FROM forward_queue
            WHERE status = 'delivered' AND delivered_at < \(cutoff)
            ORDER BY delivered_at LIMIT \(limit)
        ),
        gone AS (
            DELETE FROM forward_queue q USING doomed d
            WHERE NOT \(dryRun) AND q.notification_uuid = d.notification_uuid AND q.target_id = d.target_id AND q.status = 'delivered'
            RETURNING 1
        )
        SELECT CASE WHEN \(dryRun) THEN (SELECT count(*) FROM doomed) ELSE (SELECT count(*) FROM gone) END
        """
    }
}

/// Removes old rows, part by part, in batches of short transactions: safe beside a run, the live
/// webhook and forwarders (no long lock, no long snapshot holding back the feed's readers).
///
/// ```swift
/// let pruner = Pruner(database: database)
/// let wouldGo = try await pruner.count(.deliveredForwards, before: cutoff)   // --dry-run
/// let gone = try await pruner.prune(.deliveredForwards, before: cutoff)
/// ```
package struct Pruner: Sendable {
    package let database: Database
    /// Rows deleted per transaction.
    package var batchSize: Int

    package init(database: Database, batchSize: Int = 10_000) {
        self.database = database
        self.batchSize = batchSize
    }

    /// How many rows ``prune(_:before:)`` would remove now.
    package func count(_ part: PrunePart, before cutoff: Date) async throws -> Int {
        let store = PurchaseStore(logger: database.logger)
        return try await database.transaction { try await store.prune(part, before: cutoff, limit: nil, dryRun: true, on: $0) }
    }

    /// Removes the rows of `part` older than `cutoff`; returns how many.
    package func prune(_ part: PrunePart, before cutoff: Date) async throws -> Int {
        let (store, batchSize) = (PurchaseStore(logger: database.logger), self.batchSize)
        var total = 0
        while true {
            let count = try await database.transaction { try await store.prune(part, before: cutoff, limit: batchSize, dryRun: false, on: $0) }
            total += count
            if count < batchSize { return total }
        }
    }
}
