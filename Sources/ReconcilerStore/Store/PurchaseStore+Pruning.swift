import AppStoreServer
package import Foundation
import PostgresNIO
import ReconcilerDomain

/// One kind of row `reconciler prune` removes, each by its own age. A part is one case here, its
/// statement in the store (``PurchaseStore/prune(_:before:limit:dryRun:on:)``), and one option of
/// the command.
package enum PrunePart: String, Sendable, CaseIterable {
    /// Change-feed rows recorded before the cutoff, by the feed's prefix rule
    /// (``PurchaseStore/pruneChanges(before:limit:dryRun:on:)``).
    case changes
    /// Forwarding rows the app acknowledged (status `delivered`) before the cutoff; pending and
    /// failed deliveries are never pruned.
    case deliveredForwards
    /// The raw signed payloads (opt-in) of notifications received and signed before the cutoff,
    /// and of transactions written and signed before it: the decoded columns, the payload's hash,
    /// its header's hash and its outcome stay. Never a notification with a delivery not yet
    /// delivered (pending, leased or failed), nor one an unacknowledged quarantine names.
    case payloads
    /// The phase-1 shards, the phase-2 queue and the API timeline of runs that finished (succeeded,
    /// with rejections or lost) before the cutoff; the run, its report, counts, changes and
    /// rejections stay.
    case finishedRuns
    /// Quarantined payloads acknowledged (`rejections --ack`) before the cutoff.
    case acknowledgedQuarantine

    /// The youngest age any part accepts: one hour, so a bare number (read as milliseconds) cannot
    /// empty a table.
    package static let minimumAge: Duration = .seconds(3600)

    /// Apple's notification history keeps production notifications 180 days; a payload stays at
    /// least that long plus a margin of 30 days, the time a run may still read, forward or compare it.
    static let payloadMinimumAge: Duration = .seconds((180 + 30) * 86_400)

    /// The youngest age this part accepts.
    package var minimumAge: Duration { self == .payloads ? Self.payloadMinimumAge : Self.minimumAge }

    /// What the part removes and its age means, as the command prints it after a count:
    /// `pruned 12 changes recorded before 2026-10-26T06:30:04Z`.
    package func describe(cutoff: Date) -> String {
        let at = cutoff.formatted(.iso8601)
        return switch self {
        case .changes: "changes recorded before \(at)"
        case .deliveredForwards: "delivered forwarding rows (delivered before \(at))"
        case .payloads: "signed payloads (notifications received and signed, transactions written and signed, before \(at))"
        case .finishedRuns: "rows of finished runs (shards, queue and timeline of runs finished before \(at))"
        case .acknowledgedQuarantine: "quarantined payloads (acknowledged before \(at))"
        }
    }
}

/// Where a part that walks its table in key order continues (``PrunePart/payloads``).
package enum PruneCursor: Sendable, Hashable {
    case start
    case notifications(after: String)
    case transactions(after: PurchaseStore.TransactionKey)
    /// Nothing left to walk.
    case done
}

extension PurchaseStore {
    /// Deletes up to `limit` rows of `part` older than `cutoff` (`nil`: no limit) and returns how
    /// many; with `dryRun`, the same statement deletes nothing and returns how many it would.
    /// Parts that walk their table in key order (``PruneCursor``) continue after `cursor`.
    package func prune(
        _ part: PrunePart, before cutoff: Date, limit: Int?, dryRun: Bool, after cursor: PruneCursor = .start, on transaction: DatabaseTransaction
    ) async throws -> (count: Int, cursor: PruneCursor) {
        switch part {
        case .changes: (try await pruneChanges(before: cutoff, limit: limit, dryRun: dryRun, on: transaction), .start)
        case .deliveredForwards: (try await pruneDeliveredForwards(before: cutoff, limit: limit, dryRun: dryRun, on: transaction), .start)
        case .payloads: try await prunePayloads(before: cutoff, limit: limit, dryRun: dryRun, after: cursor, on: transaction)
        case .finishedRuns: (try await pruneFinishedRuns(before: cutoff, limit: limit, dryRun: dryRun, on: transaction), .start)
        case .acknowledgedQuarantine: (try await pruneAcknowledgedQuarantine(before: cutoff, limit: limit, dryRun: dryRun, on: transaction), .start)
        }
    }

    /// The SHA-256 of a row's signed value, as the row of `alias` keeps it after pruning: the stored
    /// hash, or for a row stored whole before migration 0015 that `compact-payloads` has not
    /// converted (`legacy`: no hash stored yet), the hash of its JWS (in `column`), computed by the
    /// statement that prunes it, as ``JWSParts/sha256(_:)`` computes it.
    static func payloadHash(of alias: String, wholeIn column: String) -> String {
        "coalesce(\(alias).payload_sha256, sha256(convert_to(\(alias).\(column), 'UTF8')))"
    }

    /// The SHA-256 of a row's JWS header as the row keeps it after pruning: the stored hash, or for
    /// a row stored whole, the hash of its JWS's first segment (the key `jws_headers` would use).
    static func headerHash(of alias: String, wholeIn column: String) -> String {
        "coalesce(\(alias).header_sha256, sha256(convert_to(split_part(\(alias).\(column), '.', 1), 'UTF8')))"
    }

    /// Removes the raw payloads of up to `limit` notifications, then of transactions, after `cursor`
    /// in key order (a count with `dryRun`). Both tables are walked by their primary key, so a
    /// prune of millions of rows reads each once. Each keeps the hashes of its payload and its header
    /// (``payloadHash(of:wholeIn:)``, ``headerHash(of:wholeIn:)``), also one not compacted yet.
    func prunePayloads(
        before cutoff: Date, limit: Int?, dryRun: Bool, after cursor: PruneCursor, on transaction: DatabaseTransaction
    )
        async throws -> (count: Int, cursor: PruneCursor)
    {
        let cutoffMilliseconds = Int64(cutoff.timeIntervalSince1970 * 1000)
        let cursor = cursor == .start ? .notifications(after: "") : cursor
        if case .notifications(let after) = cursor {
            let rows = try await transaction.query(
                """
                WITH doomed AS (
                    SELECT n.notification_uuid FROM notifications n
                    WHERE n.notification_uuid > \(after) AND n.payload_form IN ('legacy', 'whole', 'parts')
                      AND n.received_at < \(cutoff) AND n.signed_date_ms < \(cutoffMilliseconds)
                      AND NOT EXISTS (SELECT 1 FROM forward_queue q WHERE q.notification_uuid = n.notification_uuid AND q.status <> 'delivered')
                      AND NOT EXISTS (
                          SELECT 1 FROM forward_redeliveries r WHERE r.notification_uuid = n.notification_uuid AND r.status <> 'delivered')
                      AND n.notification_uuid NOT IN (
                          SELECT notification_uuid FROM quarantined_payloads WHERE acknowledged_at IS NULL AND notification_uuid IS NOT NULL)
                      AND NOT EXISTS (
                          SELECT 1 FROM quarantined_payloads p
                          WHERE p.payload_sha256 = encode(\(unescaped: Self.payloadHash(of: "n", wholeIn: "signed_payload")), 'hex')
                            AND p.acknowledged_at IS NULL)
                    ORDER BY n.notification_uuid LIMIT \(limit)
                ),
                gone AS (
                    UPDATE notifications n SET payload_form = 'pruned', payload_pruned_at = now(),
                        payload_sha256 = \(unescaped: Self.payloadHash(of: "n", wholeIn: "signed_payload")),
                        header_sha256 = \(unescaped: Self.headerHash(of: "n", wholeIn: "signed_payload")), signed_payload = NULL, payload = NULL,
                        signature = NULL, transaction_offset = NULL, transaction_signature = NULL, renewal_offset = NULL, renewal_signature = NULL
                    FROM doomed d WHERE NOT \(dryRun) AND n.notification_uuid = d.notification_uuid AND n.payload_form <> 'pruned'
                    RETURNING n.notification_uuid
                )
                SELECT CASE WHEN \(dryRun) THEN (SELECT count(*) FROM doomed) ELSE (SELECT count(*) FROM gone) END,
                       (SELECT count(*) FROM doomed), (SELECT max(notification_uuid) FROM doomed)
                """, logger: logger)
            for try await (count, selected, last) in rows.decode((Int, Int, String?).self) {
                // A batch shorter than the limit reached the end of the notifications.
                if let limit, selected >= limit, let last { return (count, .notifications(after: last)) }
                return (count, .transactions(after: .first))
            }
        }
        guard case .transactions(let after) = cursor else { return (0, .done) }
        let rows = try await transaction.query(
            """
            WITH doomed AS (
                SELECT t.bundle_id, t.environment, t.transaction_id FROM transactions t
                WHERE (t.bundle_id, t.environment, t.transaction_id) > (\(after.bundleId), \(after.environment), \(after.transactionId))
                  AND t.payload_form IN ('legacy', 'whole', 'parts') AND t.updated_at < \(cutoff) AND t.signed_date_ms < \(cutoffMilliseconds)
                  AND NOT EXISTS (
                      SELECT 1 FROM quarantined_payloads p
                      WHERE p.payload_sha256 = encode(\(unescaped: Self.payloadHash(of: "t", wholeIn: "signed_transaction_info")), 'hex')
                        AND p.acknowledged_at IS NULL)
                ORDER BY t.bundle_id, t.environment, t.transaction_id LIMIT \(limit)
            ),
            gone AS (
                UPDATE transactions t SET payload_form = 'pruned', payload_pruned_at = now(),
                    payload_sha256 = \(unescaped: Self.payloadHash(of: "t", wholeIn: "signed_transaction_info")),
                    header_sha256 = \(unescaped: Self.headerHash(of: "t", wholeIn: "signed_transaction_info")), signed_transaction_info = NULL,
                    payload = NULL, signature = NULL
                FROM doomed d
                WHERE NOT \(dryRun) AND (t.bundle_id, t.environment, t.transaction_id) = (d.bundle_id, d.environment, d.transaction_id)
                  AND t.payload_form <> 'pruned'
                RETURNING 1
            ),
            last AS (SELECT * FROM doomed ORDER BY bundle_id DESC, environment DESC, transaction_id DESC LIMIT 1)
            SELECT CASE WHEN \(dryRun) THEN (SELECT count(*) FROM doomed) ELSE (SELECT count(*) FROM gone) END, (SELECT count(*) FROM doomed),
                   (SELECT bundle_id FROM last), (SELECT environment FROM last), (SELECT transaction_id FROM last)
            """, logger: logger)
        for try await (count, selected, bundleId, environment, transactionId) in rows.decode((Int, Int, String?, AppStoreEnvironment?, String?).self)
        {
            if let limit, selected >= limit, let bundleId, let environment, let transactionId {
                return (count, .transactions(after: TransactionKey(bundleId: bundleId, environment: environment, transactionId: transactionId)))
            }
            return (count, .done)
        }
        return (0, .done)
    }

    /// Deletes up to `limit` rows of each of the shards, queue and timeline tables of runs that
    /// finished before `cutoff` (a count with `dryRun`): the runs themselves, their reports, counts,
    /// changes and rejections stay.
    func pruneFinishedRuns(before cutoff: Date, limit: Int?, dryRun: Bool, on transaction: DatabaseTransaction) async throws -> Int {
        let finished = RunRecord.Status.allCases.filter(\.isFinished).map(\.rawValue)
        let rows = try await transaction.query(
            """
            WITH runs AS (
                SELECT run_id FROM reconcile_runs WHERE status = ANY(\(finished)::text[]) AND finished_at < \(cutoff)
            ),
            doomed_shards AS (SELECT ctid FROM run_shards WHERE run_id IN (SELECT run_id FROM runs) LIMIT \(limit)),
            doomed_queue AS (SELECT ctid FROM gap_queue WHERE run_id IN (SELECT run_id FROM runs) LIMIT \(limit)),
            doomed_seconds AS (SELECT ctid FROM run_api_seconds WHERE run_id IN (SELECT run_id FROM runs) LIMIT \(limit)),
            doomed_budgets AS (SELECT ctid FROM run_api_budgets WHERE run_id IN (SELECT run_id FROM runs) LIMIT \(limit)),
            shards AS (DELETE FROM run_shards WHERE NOT \(dryRun) AND ctid = ANY(ARRAY(SELECT ctid FROM doomed_shards)) RETURNING 1),
            queue AS (DELETE FROM gap_queue WHERE NOT \(dryRun) AND ctid = ANY(ARRAY(SELECT ctid FROM doomed_queue)) RETURNING 1),
            seconds AS (DELETE FROM run_api_seconds WHERE NOT \(dryRun) AND ctid = ANY(ARRAY(SELECT ctid FROM doomed_seconds)) RETURNING 1),
            budgets AS (DELETE FROM run_api_budgets WHERE NOT \(dryRun) AND ctid = ANY(ARRAY(SELECT ctid FROM doomed_budgets)) RETURNING 1)
            SELECT CASE WHEN \(dryRun)
                THEN (SELECT count(*) FROM doomed_shards) + (SELECT count(*) FROM doomed_queue) + (SELECT count(*) FROM doomed_seconds)
                     + (SELECT count(*) FROM doomed_budgets)
                ELSE (SELECT count(*) FROM shards) + (SELECT count(*) FROM queue) + (SELECT count(*) FROM seconds) + (SELECT count(*) FROM budgets)
                END
            """, logger: logger)
        for try await count in rows.decode(Int.self) { return count }
        return 0
    }

    /// Deletes up to `limit` quarantined payloads acknowledged before `cutoff` (a count with `dryRun`).
    func pruneAcknowledgedQuarantine(before cutoff: Date, limit: Int?, dryRun: Bool, on transaction: DatabaseTransaction) async throws -> Int {
        let rows = try await transaction.query(
            """
            WITH doomed AS (
                SELECT payload_sha256 FROM quarantined_payloads WHERE acknowledged_at < \(cutoff) ORDER BY acknowledged_at LIMIT \(limit)
            ),
            gone AS (
                DELETE FROM quarantined_payloads q USING doomed d
                WHERE NOT \(dryRun) AND q.payload_sha256 = d.payload_sha256 AND q.acknowledged_at IS NOT NULL
                RETURNING 1
            )
            SELECT CASE WHEN \(dryRun) THEN (SELECT count(*) FROM doomed) ELSE (SELECT count(*) FROM gone) END
            """, logger: logger)
        for try await count in rows.decode(Int.self) { return count }
        return 0
    }

    /// Deletes up to `limit` delivered forwarding rows delivered before `cutoff`, oldest first
    /// (through the partial index on `delivered_at`); the delivered counter follows by trigger.
    func pruneDeliveredForwards(before cutoff: Date, limit: Int?, dryRun: Bool, on transaction: DatabaseTransaction) async throws -> Int {
        let rows = try await transaction.query(Self.pruneDeliveredForwardsQuery(before: cutoff, limit: limit, dryRun: dryRun), logger: logger)
        for try await count in rows.decode(Int.self) { return count }
        return 0
    }

    /// Redeliveries (`forward_redeliveries`) delivered before `cutoff` go too, up to `limit` of
    /// them beside `limit` first deliveries.
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
        ),
        doomed_redeliveries AS (
            SELECT redelivery_id FROM forward_redeliveries
            WHERE status = 'delivered' AND delivered_at < \(cutoff)
            ORDER BY delivered_at LIMIT \(limit)
        ),
        gone_redeliveries AS (
            DELETE FROM forward_redeliveries r USING doomed_redeliveries d
            WHERE NOT \(dryRun) AND r.redelivery_id = d.redelivery_id AND r.status = 'delivered'
            RETURNING 1
        )
        SELECT CASE WHEN \(dryRun) THEN (SELECT count(*) FROM doomed) + (SELECT count(*) FROM doomed_redeliveries)
            ELSE (SELECT count(*) FROM gone) + (SELECT count(*) FROM gone_redeliveries) END
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
        var (total, cursor) = (0, PruneCursor.start)
        // A part that walks two tables counts each in a statement of its own.
        repeat {
            let after = cursor
            let (count, next) = try await database.transaction {
                try await store.prune(part, before: cutoff, limit: nil, dryRun: true, after: after, on: $0)
            }
            (total, cursor) = (total + count, next)
        } while cursor != .start && cursor != .done
        return total
    }

    /// Removes the rows of `part` older than `cutoff`; returns how many.
    package func prune(_ part: PrunePart, before cutoff: Date) async throws -> Int {
        let (store, batchSize) = (PurchaseStore(logger: database.logger), self.batchSize)
        var (total, cursor) = (0, PruneCursor.start)
        while true {
            let after = cursor
            let (count, next) = try await database.transaction {
                try await store.prune(part, before: cutoff, limit: batchSize, dryRun: false, after: after, on: $0)
            }
            total += count
            switch next {
            case .start: if count < batchSize { return total }
            case .done: return total
            case .notifications, .transactions: cursor = next
            }
        }
    }
}
