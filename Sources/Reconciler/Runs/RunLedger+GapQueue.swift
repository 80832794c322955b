import AppStoreServer
import Foundation
import PostgresNIO

/// The phase-2 customer queue and the stored history revisions.
extension RunLedger {
    /// Queues the customers of purchases touched by a replayed page (same transaction as the page).
    public func enqueueTouched(runId: Int64, originalTransactionIds: [String], on connection: PostgresConnection) async throws {
        guard !originalTransactionIds.isEmpty else { return }
        try await connection.query("""
            INSERT INTO gap_queue (run_id, anchor_transaction_id, reason)
            SELECT DISTINCT \(runId), COALESCE(p.history_anchor_transaction_id, t.id), 'touched'
            FROM unnest(\(originalTransactionIds)::text[]) AS t (id) LEFT JOIN purchases p ON p.original_transaction_id = t.id
            ON CONFLICT (run_id, anchor_transaction_id) DO NOTHING
            """, logger: logger)
    }

    /// Queues subscriptions whose expiry or renewal fell due by the window's end while their stored
    /// state, not newer than the window, still says active, billing retry or grace period; with
    /// `all`, every known purchase. Returns how many rows the queue has.
    @discardableResult
    public func enqueueAtRisk(runId: Int64, environment: String, windowEnd: Int64, all: Bool) async throws -> Int {
        try await client.query("""
            INSERT INTO gap_queue (run_id, anchor_transaction_id, reason)
            SELECT DISTINCT \(runId), COALESCE(history_anchor_transaction_id, original_transaction_id), 'due'
            FROM purchases
            WHERE environment = \(environment) AND product_type = 'Auto-Renewable Subscription'
              AND (expires_date_ms <= \(windowEnd) OR renewal_date_ms <= \(windowEnd))
              AND COALESCE(last_signed_date_ms, 0) <= \(windowEnd)
              AND (status IS NULL OR status IN (1, 3, 4))
            ON CONFLICT (run_id, anchor_transaction_id) DO NOTHING
            """, logger: logger)
        if all {
            try await client.query("""
                INSERT INTO gap_queue (run_id, anchor_transaction_id, reason)
                SELECT DISTINCT \(runId), COALESCE(history_anchor_transaction_id, original_transaction_id), 'all'
                FROM purchases WHERE environment = \(environment)
                ON CONFLICT (run_id, anchor_transaction_id) DO NOTHING
                """, logger: logger)
        }
        return try await queueSummary(runId: runId).total
    }

    /// Claims the next pending customer inside the caller's transaction; the row stays locked
    /// (so no other worker takes it) until that transaction ends.
    public func claimCustomer(runId: Int64, on connection: PostgresConnection) async throws -> String? {
        let rows = try await connection.query("""
            SELECT anchor_transaction_id FROM gap_queue
            WHERE run_id = \(runId) AND status = 'pending'
            ORDER BY reason <> 'touched', anchor_transaction_id
            LIMIT 1 FOR UPDATE SKIP LOCKED
            """, logger: logger)
        for try await anchor in rows.decode(String.self) { return anchor }
        return nil
    }

    public func completeCustomer(runId: Int64, anchor: String, worker: String, transactionsSeen: Int, on connection: PostgresConnection) async throws {
        try await connection.query("""
            UPDATE gap_queue SET status = 'done', attempts = attempts + 1, transactions_seen = \(transactionsSeen), last_error = NULL,
                worker = \(worker), updated_at = now()
            WHERE run_id = \(runId) AND anchor_transaction_id = \(anchor)
            """, logger: logger)
    }

    public func failCustomer(runId: Int64, anchor: String, worker: String, error: String, on connection: PostgresConnection) async throws {
        try await connection.query("""
            UPDATE gap_queue SET status = 'failed', attempts = attempts + 1, last_error = \(error), worker = \(worker), updated_at = now()
            WHERE run_id = \(runId) AND anchor_transaction_id = \(anchor)
            """, logger: logger)
    }

    /// Marks pending customers whose purchases another customer's history covered as done.
    /// Rows other workers hold are skipped, never waited for.
    public func markCovered(runId: Int64, anchors: [String], by anchor: String, on connection: PostgresConnection) async throws {
        let others = anchors.filter { $0 != anchor }
        guard !others.isEmpty else { return }
        try await connection.query("""
            UPDATE gap_queue SET status = 'done', last_error = NULL, worker = \("covered by \(anchor)"), updated_at = now()
            WHERE (run_id, anchor_transaction_id) IN (
                SELECT run_id, anchor_transaction_id FROM gap_queue
                WHERE run_id = \(runId) AND anchor_transaction_id = ANY(\(others)::text[]) AND status = 'pending'
                FOR UPDATE SKIP LOCKED)
            """, logger: logger)
    }

    public struct QueueSummary: Sendable, Codable, Hashable {
        public var pending: Int
        public var done: Int
        public var failed: Int
        public var total: Int { pending + done + failed }
    }

    public func queueSummary(runId: Int64) async throws -> QueueSummary {
        let rows = try await client.query("""
            SELECT count(*) FILTER (WHERE status = 'pending'), count(*) FILTER (WHERE status = 'done'), count(*) FILTER (WHERE status = 'failed')
            FROM gap_queue WHERE run_id = \(runId)
            """, logger: logger)
        for try await (pending, done, failed) in rows.decode((Int, Int, Int).self) {
            return QueueSummary(pending: pending, done: done, failed: failed)
        }
        return QueueSummary(pending: 0, done: 0, failed: 0)
    }

    public struct FailedCustomer: Sendable, Codable, Hashable {
        public var anchorTransactionId: String
        public var error: String
    }

    public func failedCustomers(runId: Int64) async throws -> [FailedCustomer] {
        let rows = try await client.query("""
            SELECT anchor_transaction_id, COALESCE(last_error, '') FROM gap_queue WHERE run_id = \(runId) AND status = 'failed'
            ORDER BY anchor_transaction_id
            """, logger: logger)
        var result: [FailedCustomer] = []
        for try await (anchor, error) in rows.decode((String, String).self) { result.append(.init(anchorTransactionId: anchor, error: error)) }
        return result
    }

    /// How many transactions phase 2 received for the run.
    public func transactionsSeen(runId: Int64) async throws -> Int {
        let rows = try await client.query("SELECT COALESCE(sum(transactions_seen), 0)::bigint FROM gap_queue WHERE run_id = \(runId)", logger: logger)
        for try await value in rows.decode(Int64.self) { return Int(value) }
        return 0
    }

    // MARK: Revisions

    public func revision(anchor: String) async throws -> String? {
        let rows = try await client.query(
            "SELECT revision FROM history_revisions WHERE anchor_transaction_id = \(anchor)", logger: logger)
        for try await revision in rows.decode(String.self) { return revision }
        return nil
    }

    public func storeRevision(anchor: String, environment: String, revision: String, on connection: PostgresConnection) async throws {
        try await connection.query("""
            INSERT INTO history_revisions (anchor_transaction_id, environment, revision) VALUES (\(anchor), \(environment), \(revision))
            ON CONFLICT (anchor_transaction_id) DO UPDATE SET revision = EXCLUDED.revision, updated_at = now()
            """, logger: logger)
    }

    /// Remembers which customer history covers these purchases, so later runs queue that customer once.
    public func setHistoryAnchor(_ anchor: String, for originalTransactionIds: [String], on connection: PostgresConnection) async throws {
        guard !originalTransactionIds.isEmpty else { return }
        try await connection.query("""
            UPDATE purchases SET history_anchor_transaction_id = \(anchor)
            WHERE original_transaction_id = ANY(\(originalTransactionIds)::text[])
              AND history_anchor_transaction_id IS DISTINCT FROM \(anchor)
            """, logger: logger)
    }
}
