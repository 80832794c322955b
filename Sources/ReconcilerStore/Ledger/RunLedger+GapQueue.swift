import AppStoreServer
import Foundation
import PostgresNIO
package import ReconcilerDomain
import ReconcilerShared

/// The phase-2 customer queue. A worker leases a customer (a row it owns until `lease_until`,
/// renewed while it works), fetches from Apple with no transaction open, and completes the row
/// in the short transaction that applies the customer's last page. A dead worker's lease simply
/// runs out and another worker takes the customer over; nothing waits on a row lock.
extension RunLedger {
    /// Why a customer is in the queue.
    package enum QueueReason: String, Sendable, Codable {
        /// A replayed page touched one of its purchases.
        case touched
        /// A subscription of it fell due after it was last checked.
        case due
        /// `--all`.
        case all
    }

    /// Where a customer of the queue stands.
    enum QueueStatus: String, Sendable, Codable, CaseIterable {
        /// Waiting for a worker.
        case pending
        /// A worker owns it until its lease runs out.
        case leased
        case done
        case failed
        /// Failed in `--give-up-after` attempts in a row: never retried, listed in `rejections`.
        case givenUp = "given_up"
    }

    /// How long before a read of a customer's history began a notification must have been signed
    /// for that read to be known to include it. Apple signs a notification after the change it
    /// reports; the margin covers the two clocks and Apple's own propagation.
    static let rereadMargin: Duration = .seconds(600)
    static var rereadMarginMilliseconds: Int64 { rereadMargin.components.seconds * 1000 }

    /// Queues customers (in the caller's transaction) without saying when they were touched: a
    /// customer queued as `touched` this way is read again even when phase 2 already read it.
    /// Other reasons leave a queued customer as it is.
    package func enqueue(runId: Int64, anchors: [String], reason: QueueReason, on transaction: DatabaseTransaction) async throws {
        try await enqueue(runId: runId, touches: anchors.map { Touch(anchor: $0, newestSignedDate: nil) }, reason: reason, on: transaction)
    }

    /// A customer phase 1 touched, and the signedDate of the newest notification that touched it.
    package struct Touch: Sendable, Hashable {
        package var anchor: String
        package var newestSignedDate: Int64?

        package init(anchor: String, newestSignedDate: Int64? = nil) {
            self.anchor = anchor
            self.newestSignedDate = newestSignedDate
        }
    }

    /// Queues customers that replayed notifications touched (in the caller's transaction). A
    /// customer phase 2 already read, or is reading, is read again only when one of the
    /// notifications was signed after that read began (less ``rereadMargin``): what Apple signed
    /// before is in the history the read returns. A done customer is then pending again; a leased
    /// one goes back to pending when its worker completes it.
    package func enqueue(runId: Int64, touches: [Touch], reason: QueueReason = .touched, on transaction: DatabaseTransaction) async throws {
        guard !touches.isEmpty else { return }
        struct Row: Encodable {
            var anchor_transaction_id: String
            var touched_signed_ms: Int64?
        }
        var newest: [String: Int64] = [:]
        var undated = Set<String>()
        for touch in touches {
            if let signed = touch.newestSignedDate {
                newest[touch.anchor] = max(newest[touch.anchor] ?? signed, signed)
            } else {
                undated.insert(touch.anchor)
            }
        }
        let rows = try PurchaseStore.json(
            undated.union(newest.keys).sorted().map {
                Row(anchor_transaction_id: $0, touched_signed_ms: undated.contains($0) ? nil : newest[$0])
            })
        // A touch without a date, or a customer whose read has not begun, always counts.
        let readAgain = """
            (EXCLUDED.touched_signed_ms IS NULL OR q.read_started_at IS NULL
             OR EXCLUDED.touched_signed_ms > extract(epoch FROM q.read_started_at) * 1000 - \(Self.rereadMarginMilliseconds))
            """
        try await transaction.query(
            """
            INSERT INTO gap_queue AS q (run_id, anchor_transaction_id, reason, touched_signed_ms)
            SELECT \(runId), t.anchor_transaction_id, \(reason.rawValue), t.touched_signed_ms
            FROM jsonb_to_recordset(\(rows)::jsonb) AS t (anchor_transaction_id text, touched_signed_ms bigint)
            ORDER BY t.anchor_transaction_id
            ON CONFLICT (run_id, anchor_transaction_id) DO UPDATE
                SET touched_signed_ms = GREATEST(q.touched_signed_ms, EXCLUDED.touched_signed_ms),
                    status = CASE WHEN q.status = 'done' AND \(unescaped: readAgain) THEN 'pending' ELSE q.status END,
                    touched_again = q.touched_again OR (q.status = 'leased' AND \(unescaped: readAgain)),
                    reason = CASE WHEN q.status IN ('done', 'leased') AND \(unescaped: readAgain) THEN 'touched' ELSE q.reason END,
                    updated_at = now()
                WHERE EXCLUDED.reason = 'touched'
            """, logger: logger)
    }

    /// Leases the next customer nobody works on (pending, or leased by a worker whose lease ran
    /// out), touched customers first, then in the order they were queued; `nil` when there is
    /// none right now. The lease's start is when this read of the customer's history begins.
    package func leaseCustomer(runId: Int64, worker: String, leaseDuration: Duration) async throws -> String? {
        let milliseconds = leaseDuration.milliseconds
        return try await read { [logger] transaction in
            let rows = try await transaction.query(
                """
                UPDATE gap_queue SET status = 'leased', worker = \(worker), lease_until = now() + \(milliseconds) * interval '1 millisecond',
                    read_started_at = now(), updated_at = now()
                WHERE (run_id, anchor_transaction_id) = (
                    SELECT run_id, anchor_transaction_id FROM gap_queue
                    WHERE run_id = \(runId) AND status IN ('pending', 'leased') AND (status = 'pending' OR lease_until < now())
                    ORDER BY reason <> 'touched', queued_at, hashtext(anchor_transaction_id)
                    LIMIT 1 FOR UPDATE SKIP LOCKED)
                RETURNING anchor_transaction_id
                """, logger: logger)
            for try await anchor in rows.decode(String.self) { return anchor }
            return nil
        }
    }

    /// Leases this one customer of the run when nobody works on it (pending, or leased by a worker
    /// whose lease ran out): `import` reads each row's customer itself, several at once, so a row
    /// takes its own customer rather than the queue's next; `nil` when it is done or leased.
    package func leaseCustomer(runId: Int64, anchor: String, worker: String, leaseDuration: Duration) async throws -> String? {
        let milliseconds = leaseDuration.milliseconds
        return try await read { [logger] transaction in
            let rows = try await transaction.query(
                """
                UPDATE gap_queue SET status = 'leased', worker = \(worker), lease_until = now() + \(milliseconds) * interval '1 millisecond',
                    read_started_at = now(), updated_at = now()
                WHERE run_id = \(runId) AND anchor_transaction_id = \(anchor)
                  AND (status = 'pending' OR (status = 'leased' AND lease_until < now()))
                RETURNING anchor_transaction_id
                """, logger: logger)
            for try await anchor in rows.decode(String.self) { return anchor }
            return nil
        }
    }

    /// Extends a customer's lease (in the caller's transaction); `false` when this worker lost it.
    package func renewCustomerLease(
        runId: Int64, anchor: String, worker: String, leaseDuration: Duration,
        on transaction: DatabaseTransaction
    ) async throws -> Bool {
        let milliseconds = leaseDuration.milliseconds
        let rows = try await transaction.query(
            """
            UPDATE gap_queue SET lease_until = now() + \(milliseconds) * interval '1 millisecond', updated_at = now()
            WHERE run_id = \(runId) AND anchor_transaction_id = \(anchor) AND worker = \(worker) AND status = 'leased'
            RETURNING 1
            """, logger: logger)
        for try await _ in rows { return true }
        return false
    }

    /// Completes a customer this worker holds (in the transaction of its last page), or makes it
    /// pending again when phase 1 touched it meanwhile; `false` when the lease was lost, in which
    /// case the caller rolls back.
    package func completeCustomer(
        runId: Int64, anchor: String, worker: String, transactionsSeen: Int,
        on transaction: DatabaseTransaction
    ) async throws -> Bool {
        let rows = try await transaction.query(
            """
            UPDATE gap_queue SET status = CASE WHEN touched_again THEN 'pending' ELSE 'done' END, touched_again = false,
                attempts = attempts + 1, consecutive_failures = 0, transactions_seen = transactions_seen + \(transactionsSeen), last_error = NULL,
                failure_kind = NULL, lease_until = NULL, updated_at = now()
            WHERE run_id = \(runId) AND anchor_transaction_id = \(anchor) AND worker = \(worker) AND status = 'leased'
            RETURNING 1
            """, logger: logger)
        for try await _ in rows { return true }
        return false
    }

    /// Marks a customer this worker holds as failed: the next attempt of the run retries it,
    /// unless the policy gives it up (Apple refused it, or it failed in too many attempts in a
    /// row); a given-up customer is recorded in `given_up` in the same transaction.
    @discardableResult
    package func failCustomer(
        runId: Int64, anchor: String, worker: String, kind: FailureKind, error: String, policy: GiveUpPolicy = .init()
    ) async throws -> FailureOutcome? {
        try await read { [logger] transaction in
            let rows = try await transaction.query(
                """
                UPDATE gap_queue SET consecutive_failures = consecutive_failures + 1,
                    status = CASE WHEN \(kind.rawValue) = 'retryable' AND consecutive_failures + 1 >= \(policy.attempts) THEN 'given_up'
                                  ELSE 'failed' END,
                    failure_kind = \(kind.rawValue), attempts = attempts + 1, last_error = \(error), lease_until = NULL, updated_at = now()
                WHERE run_id = \(runId) AND anchor_transaction_id = \(anchor) AND worker = \(worker) AND status = 'leased'
                RETURNING consecutive_failures
                """, logger: logger)
            var failures: Int?
            for try await count in rows.decode(Int.self) { failures = count }
            guard let failures else { return nil }
            guard policy.givesUp(kind, consecutiveFailures: failures) else { return .failed(consecutiveFailures: failures) }
            try await self.recordGivenUp(
                runId: runId, kind: .customer, subject: anchor, failureKind: kind, reason: error, failures: failures, on: transaction)
            return .givenUp(consecutiveFailures: failures)
        }
    }

    /// Gives a customer back to the queue (this worker stops without finishing it).
    package func releaseCustomer(runId: Int64, anchor: String, worker: String) async throws {
        try await read { [logger] transaction in
            try await transaction.query(
                """
                UPDATE gap_queue SET status = 'pending', lease_until = NULL, updated_at = now()
                WHERE run_id = \(runId) AND anchor_transaction_id = \(anchor) AND worker = \(worker) AND status = 'leased'
                """, logger: logger)
        }
    }

    /// Gives back the customers leased by workers `isDead` says are gone (a process of this
    /// machine that was killed), so they need not be waited out; returns how many.
    @discardableResult
    package func releaseCustomers(runId: Int64, ofWorkers isDead: @escaping @Sendable (String) -> Bool) async throws -> Int {
        try await read { [logger] transaction in
            let rows = try await transaction.query(
                "SELECT DISTINCT worker FROM gap_queue WHERE run_id = \(runId) AND status = 'leased' AND worker IS NOT NULL", logger: logger)
            var dead: [String] = []
            for try await worker in rows.decode(String.self) where isDead(worker) { dead.append(worker) }
            guard !dead.isEmpty else { return 0 }
            let released = try await transaction.query(
                """
                UPDATE gap_queue SET status = 'pending', lease_until = NULL, updated_at = now()
                WHERE run_id = \(runId) AND status = 'leased' AND worker = ANY(\(dead)::text[])
                RETURNING 1
                """, logger: logger)
            var count = 0
            for try await _ in released { count += 1 }
            return count
        }
    }

    /// Notes that Apple refused a customer's stored revision, so its history was read from the start.
    package func noteRevisionReset(runId: Int64, anchor: String) async throws {
        try await read { [logger] transaction in
            try await transaction.query(
                """
                UPDATE gap_queue SET revision_resets = revision_resets + 1 WHERE run_id = \(runId) AND anchor_transaction_id = \(anchor)
                """, logger: logger)
        }
    }

    /// Marks pending customers whose purchases another customer's history covered as done,
    /// unless a notification that touched them was signed after that history's read began (see
    /// ``enqueue(runId:touches:reason:on:)``). Rows other workers hold are skipped, never waited for.
    package func markCovered(runId: Int64, anchors: [String], by anchor: String, on transaction: DatabaseTransaction) async throws {
        let others = anchors.filter { $0 != anchor }
        guard !others.isEmpty else { return }
        try await transaction.query(
            """
            UPDATE gap_queue SET status = 'done', last_error = NULL, worker = \("covered by \(anchor)"), updated_at = now()
            WHERE (run_id, anchor_transaction_id) IN (
                SELECT run_id, anchor_transaction_id FROM gap_queue
                WHERE run_id = \(runId) AND anchor_transaction_id = ANY(\(others)::text[]) AND status = 'pending'
                  AND (touched_signed_ms IS NULL OR touched_signed_ms <= (
                      SELECT extract(epoch FROM read_started_at) * 1000 - \(Self.rereadMarginMilliseconds) FROM gap_queue
                      WHERE run_id = \(runId) AND anchor_transaction_id = \(anchor)))
                ORDER BY anchor_transaction_id
                FOR UPDATE SKIP LOCKED)
            """, logger: logger)
    }

    package struct QueueSummary: Sendable, Codable, Hashable {
        package var pending: Int
        package var leased: Int
        package var done: Int
        package var failed: Int
        /// Given up after failing in too many attempts in a row; listed in `rejections`.
        package var givenUp: Int = 0
        package var total: Int { pending + leased + done + failed + givenUp }
        /// Customers still to be worked on, here or by another worker.
        package var open: Int { pending + leased }
    }

    package func queueSummary(runId: Int64) async throws -> QueueSummary {
        try await read { [logger] transaction in
            let rows = try await transaction.query(
                "SELECT status, count(*) FROM gap_queue WHERE run_id = \(runId) GROUP BY status", logger: logger)
            var counts: [QueueStatus: Int] = [:]
            for try await (status, count) in rows.decode((String, Int).self) {
                counts[try ReconcilerError.stored(status, in: "gap_queue.status", as: QueueStatus.self)] = count
            }
            return QueueSummary(
                pending: counts[.pending] ?? 0, leased: counts[.leased] ?? 0, done: counts[.done] ?? 0, failed: counts[.failed] ?? 0,
                givenUp: counts[.givenUp] ?? 0)
        }
    }

    /// A customer phase 2 failed for (the domain's ``ReconcilerDomain/FailedCustomer``).
    package typealias FailedCustomer = ReconcilerDomain.FailedCustomer

    package func failedCustomers(runId: Int64) async throws -> [FailedCustomer] {
        try await read { [logger] transaction in
            let rows = try await transaction.query(
                """
                SELECT anchor_transaction_id, COALESCE(failure_kind, 'retryable'), COALESCE(last_error, '') FROM gap_queue
                WHERE run_id = \(runId) AND status = 'failed' ORDER BY anchor_transaction_id
                """, logger: logger)
            var result: [FailedCustomer] = []
            for try await (anchor, kind, error) in rows.decode((String, String, String).self) {
                result.append(
                    .init(anchorTransactionId: anchor, kind: try ReconcilerError.stored(kind, in: "gap_queue.failure_kind"), error: error))
            }
            return result
        }
    }

    /// How many transactions phase 2 received for the run, and the customers whose stored revision
    /// Apple refused.
    package func gapFillTotals(runId: Int64) async throws -> (transactionsSeen: Int, revisionResets: [String]) {
        try await read { [logger] transaction in
            var seen = 0
            let rows = try await transaction.query(
                "SELECT COALESCE(sum(transactions_seen), 0)::bigint FROM gap_queue WHERE run_id = \(runId)", logger: logger)
            for try await value in rows.decode(Int64.self) { seen = Int(value) }
            var resets: [String] = []
            let reset = try await transaction.query(
                """
                SELECT anchor_transaction_id FROM gap_queue WHERE run_id = \(runId) AND revision_resets > 0 ORDER BY anchor_transaction_id
                """, logger: logger)
            for try await anchor in reset.decode(String.self) { resets.append(anchor) }
            return (seen, resets)
        }
    }
}
