package import AppStoreServer
package import Foundation
import PostgresNIO
package import ReconcilerDomain
import ReconcilerShared

/// The queue of notifications to deliver to the app's own webhook, written by the statement that
/// records each notification (``NotificationLog/insert(_:source:forwarding:on:)``). A row names its
/// webhook by a ``ForwardingTarget`` (an id and the redacted URL); a forwarder configured with a
/// URL delivers only the rows of that URL's target. It leases one due delivery right before
/// sending it (a row it owns, with a token of its own, until `lease_until`), keeps renewing the
/// lease while the request is in flight, sends with no transaction open, and records the app's
/// answer only while the row still carries its token.
extension ForwardQueue {
    /// One notification to deliver, leased by one forwarder.
    package struct Delivery: Sendable, Hashable {
        package var notificationUUID: String
        package var target: ForwardingTarget
        /// The notification's JWS, as Apple signed it.
        package var signedPayload: String
        /// Deliveries tried before this one.
        package var attempts: Int
        /// This lease's token: renewing, recording and sending need the row to still carry it.
        package var leaseToken: UUID
        /// A consumption request still before its deadline when leased: sent ahead of everything else.
        package var urgent: Bool = false
        /// Its row of `forward_redeliveries` when `forward --redeliver` queued it again (migration 0022).
        package var redeliveryId: Int64? = nil

        /// Queued again by `forward --redeliver`: sent with the header `Reconciler-Redelivery: 1`.
        package var redelivery: Bool { redeliveryId != nil }
        /// The table its row is in.
        var table: String { redelivery ? "forward_redeliveries" : "forward_queue" }
    }

    /// Leases a due delivery for `target` (new, due for a retry, or held by a forwarder whose lease
    /// ran out) with `token`, for `leaseDuration`; `nil` when none is due. With `dueBy` (a time the
    /// database gave: ``now(on:)``), only a delivery due by then: a pass that started then tries
    /// each delivery once, not again when its backoff runs out during the pass. Consumption requests
    /// still before their deadline come first, the soonest deadline first; then the oldest due.
    ///
    /// A delivery whose payload cannot be rebuilt from what is stored (a header gone from
    /// `jws_headers`, a column emptied by hand) can never be sent: it is marked failed with the
    /// reason (``unrebuildablePayload``) and the next due one is leased, so it does not hold up the
    /// queue behind it. At most ``unrebuildablePerLease`` are marked per call (`nil` after that:
    /// the transaction stays short; the next call goes on).
    func leaseDelivery(
        target: ForwardingTarget, worker: String, token: UUID, leaseDuration: Duration, dueBy: Date? = nil, on transaction: DatabaseTransaction
    ) async throws -> Delivery? {
        var unrebuildable = 0
        for urgent in [true, false] {
            while unrebuildable < Self.unrebuildablePerLease {
                let rows = try await transaction.query(
                    Self.leaseQuery(target: target, worker: worker, token: token, leaseDuration: leaseDuration, dueBy: dueBy, urgent: urgent),
                    logger: logger)
                var leased: NamedColumns?
                for try await row in rows { leased = NamedColumns(row) }
                guard let columns = leased else { break }
                // The headers the payload names, by hash in hex.
                let headers = try (columns["headers"] as String?).map { try JSONDecoder().decode([String: String].self, from: Data($0.utf8)) } ?? [:]
                let uuid: String = try columns["notification_uuid"]
                // Apple's exact body, rebuilt from what is stored (the payload of a queued delivery is never pruned).
                let stored = try NotificationLog.storedPayload(columns, header: { headers[Bytea.plainHex($0)] })
                guard let payload = stored.jws else {
                    let missing = try NotificationLog.headerHashes(columns).map(Bytea.plainHex).filter { headers[$0] == nil }
                    try await failUnrebuildable(uuid, target: target, token: token, stored: stored, missingHeaders: missing, on: transaction)
                    unrebuildable += 1
                    continue
                }
                return Delivery(
                    notificationUUID: uuid, target: ForwardingTarget(id: target.id, redacted: try columns["target_redacted"]),
                    signedPayload: payload, attempts: try columns["attempts"], leaseToken: token, urgent: urgent)
            }
        }
        // First deliveries before redeliveries: a redelivered window never holds up new notifications.
        guard unrebuildable < Self.unrebuildablePerLease else { return nil }
        return try await leaseRedelivery(target: target, worker: worker, token: token, leaseDuration: leaseDuration, dueBy: dueBy, on: transaction)
    }

    /// How many deliveries that cannot be rebuilt one lease marks failed at most.
    static let unrebuildablePerLease = 100

    /// The `last_error` of a delivery whose payload cannot be rebuilt begins with this (the error's
    /// code first, so ``unrebuildableFailures(on:)`` tells these apart from the app's refusals); what is
    /// missing follows.
    package static let unrebuildablePayload = "\(ReconcilerError.Code.payloadUnavailable): its stored signed payload cannot be rebuilt"

    /// Marks a delivery just leased with `token` failed, because its payload cannot be rebuilt; no
    /// attempt is counted. `table`: `forward_queue`, or `forward_redeliveries` for a redelivery.
    func failUnrebuildable(
        _ uuid: String, target: ForwardingTarget, token: UUID, stored: StoredSignedValue, missingHeaders: [String],
        table: String = "forward_queue", on transaction: DatabaseTransaction
    ) async throws {
        let what =
            switch stored {
            case .pruned: "its payload was pruned"
            case .incomplete, .signed:
                missingHeaders.isEmpty
                    ? "a column it needs is empty or does not inflate" : "JWS header \(missingHeaders.joined(separator: ", ")) not in jws_headers"
            }
        let reason = "\(Self.unrebuildablePayload) (\(what))"
        logger.warning(
            "a queued notification cannot be forwarded: its stored signed payload cannot be rebuilt; marked failed",
            metadata: [
                "notificationUUID": "\(uuid)", "target": "\(target.redacted)", "reason": "\(what)",
                "do": "see the runbook: a delivery that cannot be rebuilt",
            ])
        try await transaction.query(
            """
            UPDATE \(unescaped: table) SET status = 'failed', last_status_code = NULL, last_error = \(reason), lease_until = NULL, lease_token = NULL
            WHERE notification_uuid = \(uuid) AND target_id = \(target.id) AND status = 'leased' AND lease_token = \(token)
            """, logger: logger)
    }

    /// Leases one due delivery: with `urgent`, of a consumption request before its deadline (from the
    /// partial index of deadlines), else the oldest due of any.
    static func leaseQuery(
        target: ForwardingTarget, worker: String, token: UUID, leaseDuration: Duration, dueBy: Date? = nil, urgent: Bool
    ) -> PostgresQuery {
        let due = "((status = 'pending' AND next_attempt_at <= coalesce($5, now())) OR (status = 'leased' AND lease_until < now()))"
        let pick =
            urgent
            ? """
            SELECT notification_uuid, target_id FROM forward_queue
            WHERE target_id = $1 AND respond_by_ms > (extract(epoch FROM now()) * 1000)::bigint AND status IN ('pending', 'leased') AND \(due)
            ORDER BY respond_by_ms, notification_uuid
            LIMIT 1 FOR UPDATE SKIP LOCKED
            """
            : """
            SELECT notification_uuid, target_id FROM forward_queue
            WHERE target_id = $1 AND \(due)
            ORDER BY next_attempt_at, notification_uuid
            LIMIT 1 FOR UPDATE SKIP LOCKED
            """
        var bindings = PostgresBindings()
        bindings.append(target.id)
        bindings.append(worker)
        bindings.append(token)
        bindings.append(leaseDuration.milliseconds)
        if let dueBy { bindings.append(dueBy) } else { bindings.appendNull() }
        return PostgresQuery(
            unsafeSQL: """
                UPDATE forward_queue AS q SET status = 'leased', worker = $2, lease_token = $3,
                    lease_until = now() + $4 * interval '1 millisecond'
                FROM (\(pick)) AS due, notifications n
                WHERE q.notification_uuid = due.notification_uuid AND q.target_id = due.target_id AND n.notification_uuid = q.notification_uuid
                RETURNING q.notification_uuid, q.target_redacted, q.attempts, \(NotificationLog.payloadColumns),
                    (SELECT jsonb_object_agg(encode(h.sha256, 'hex'), h.encoded_header)::text FROM jws_headers h
                     WHERE h.sha256 IN (n.header_sha256, n.transaction_header_sha256, n.renewal_header_sha256)) AS headers
                """, binds: bindings)
    }

    /// The database's clock now (the start of `transaction`), which `next_attempt_at` and `lease_until` are judged by.
    package func now(on transaction: DatabaseTransaction) async throws -> Date {
        for try await now in try await transaction.query("SELECT now()", logger: logger).decode(Date.self) { return now }
        throw ReconcilerError(.missingRow, "SELECT now() returned no row")
    }

    /// Makes the deliveries a run held back due now, in the order they were queued (the run's query
    /// of consumption requests is done); returns how many. Deliveries already tried are left alone.
    package func releaseHeldDeliveries(runId: Int64, on transaction: DatabaseTransaction) async throws -> Int {
        let rows = try await transaction.query(
            """
            WITH released AS (
                UPDATE forward_queue SET held = false, next_attempt_at = least(queued_at, now())
                WHERE run_id = \(runId) AND held AND status = 'pending' AND attempts = 0
                RETURNING 1
            )
            SELECT count(*) FROM released
            """, logger: logger)
        for try await count in rows.decode(Int.self) { return count }
        return 0
    }

    /// Extends the leases of `tokens` that `worker` still holds by `leaseDuration` from now;
    /// returns those (a token missing from the answer was taken over or released: stop sending).
    func renewDeliveryLeases(
        _ tokens: [UUID], worker: String, leaseDuration: Duration, on transaction: DatabaseTransaction
    ) async throws -> Set<UUID> {
        guard !tokens.isEmpty else { return [] }
        var held = Set<UUID>()
        for table in ["forward_queue", "forward_redeliveries"] {
            let rows = try await transaction.query(
                """
                UPDATE \(unescaped: table) SET lease_until = now() + \(leaseDuration.milliseconds) * interval '1 millisecond'
                WHERE status = 'leased' AND lease_token = ANY(\(tokens)) AND worker = \(worker)
                RETURNING lease_token
                """, logger: logger)
            for try await token in rows.decode(UUID.self) { held.insert(token) }
        }
        return held
    }

    /// What the app answered to a delivery.
    package enum DeliveryResult: Sendable {
        /// A 2xx: never sent again.
        case delivered(statusCode: Int)
        /// Another status or no answer: tried again after `retryAfter`.
        case retry(statusCode: Int?, error: String, after: Duration)
        /// Out of attempts.
        case failed(statusCode: Int?, error: String)
    }

    /// Records the app's answer to a delivery, if the row still carries the delivery's lease
    /// token; returns whether it did (`false`: another forwarder took the delivery over).
    @discardableResult
    func recordDelivery(
        _ delivery: Delivery, worker: String, result: DeliveryResult, on transaction: DatabaseTransaction
    ) async throws -> Bool {
        let (uuid, target, token, table) = (delivery.notificationUUID, delivery.target.id, delivery.leaseToken, delivery.table)
        let rows: PostgresRowSequence
        switch result {
        case .delivered(let code):
            rows = try await transaction.query(
                """
                UPDATE \(unescaped: table) SET status = 'delivered', attempts = attempts + 1, last_status_code = \(code), last_error = NULL,
                    delivered_at = now(), lease_until = NULL, lease_token = NULL
                WHERE notification_uuid = \(uuid) AND target_id = \(target) AND status = 'leased' AND lease_token = \(token) AND worker = \(worker)
                RETURNING 1
                """, logger: logger)
        case .retry(let code, let error, let after):
            rows = try await transaction.query(
                """
                UPDATE \(unescaped: table) SET status = 'pending', attempts = attempts + 1, last_status_code = \(code), last_error = \(error),
                    next_attempt_at = now() + \(after.milliseconds) * interval '1 millisecond', lease_until = NULL, lease_token = NULL
                WHERE notification_uuid = \(uuid) AND target_id = \(target) AND status = 'leased' AND lease_token = \(token) AND worker = \(worker)
                RETURNING 1
                """, logger: logger)
        case .failed(let code, let error):
            rows = try await transaction.query(
                """
                UPDATE \(unescaped: table) SET status = 'failed', attempts = attempts + 1, last_status_code = \(code), last_error = \(error),
                    lease_until = NULL, lease_token = NULL
                WHERE notification_uuid = \(uuid) AND target_id = \(target) AND status = 'leased' AND lease_token = \(token) AND worker = \(worker)
                RETURNING 1
                """, logger: logger)
        }
        for try await _ in rows { return true }
        return false
    }

    /// Puts back the deliveries leased by workers that `isGone` (a forwarder of this host that
    /// died), so they are sent again now rather than when their lease runs out.
    func releaseDeliveries(where isGone: (String) -> Bool, on transaction: DatabaseTransaction) async throws {
        for table in ["forward_queue", "forward_redeliveries"] {
            let rows = try await transaction.query(
                "SELECT DISTINCT worker FROM \(unescaped: table) WHERE status = 'leased' AND worker IS NOT NULL", logger: logger)
            var gone: [String] = []
            for try await worker in rows.decode(String.self) where isGone(worker) { gone.append(worker) }
            guard !gone.isEmpty else { continue }
            try await transaction.query(
                """
                UPDATE \(unescaped: table) SET status = 'pending', lease_until = NULL, lease_token = NULL, next_attempt_at = now()
                WHERE status = 'leased' AND worker = ANY(\(gone.sorted()))
                """, logger: logger)
        }
    }

    /// Gives the failed deliveries (out of attempts) for `target`, redeliveries included, a new
    /// set of attempts, after the app's endpoint was fixed; returns how many.
    func retryFailedDeliveries(target: ForwardingTarget, on transaction: DatabaseTransaction) async throws -> Int {
        var total = 0
        for table in ["forward_queue", "forward_redeliveries"] {
            let rows = try await transaction.query(
                """
                WITH retried AS (
                    UPDATE \(unescaped: table) SET status = 'pending', attempts = 0, next_attempt_at = now(), lease_until = NULL, lease_token = NULL
                    WHERE status = 'failed' AND target_id = \(target.id) RETURNING 1
                )
                SELECT count(*) FROM retried
                """, logger: logger)
            for try await count in rows.decode(Int.self) { total += count }
        }
        return total
    }

    /// Deliveries by state: of some runs' notifications, or of the whole queue.
    package struct ForwardingSummary: Sendable, Codable, Hashable {
        package var delivered = 0
        /// Waiting for their first try or a retry, or being sent.
        package var pending = 0
        /// Out of attempts: `reconciler forward --retry-failed` tries them again.
        package var failed = 0
        /// When the oldest delivery still waiting was queued.
        package var oldestPending: Date?

        package init() {}
    }

    /// Where a delivery stands (`forward_queue.status`).
    package enum DeliveryStatus: String, Sendable, Codable, CaseIterable {
        /// Waiting for its first try, or for a retry at `next_attempt_at`.
        case pending
        /// A forwarder is sending it (until `lease_until`).
        case leased
        /// The app answered 2xx: never sent again.
        case delivered
        /// Out of attempts.
        case failed
    }

    /// Where the deliveries of `runIds` stand (`nil`: the whole queue, as the gauges read it
    /// every minute: ``queueSummaryQuery()``).
    func forwardingSummary(runIds: [Int64]?, on transaction: DatabaseTransaction) async throws -> ForwardingSummary {
        guard let runIds else {
            var summary = ForwardingSummary()
            let rows = try await transaction.query(Self.queueSummaryQuery(), logger: logger)
            for try await (pending, oldest, failed, delivered) in rows.decode((Int, Date?, Int, Int).self) {
                (summary.pending, summary.oldestPending, summary.failed, summary.delivered) = (pending, oldest, failed, delivered)
            }
            return summary
        }
        let rows = try await transaction.query(
            """
            SELECT status, count(*), min(queued_at) FROM forward_queue WHERE run_id = ANY(\(runIds)) GROUP BY status
            """, logger: logger)
        var summary = ForwardingSummary()
        for try await (status, count, oldest) in rows.decode((String, Int, Date).self) {
            switch try ReconcilerError.stored(status, in: "forward_queue.status", as: DeliveryStatus.self) {
            case .delivered: summary.delivered += count
            case .failed: summary.failed += count
            case .pending, .leased:
                summary.pending += count
                summary.oldestPending = min(summary.oldestPending ?? oldest, oldest)
            }
        }
        return summary
    }

    /// The whole queue's summary: what waits and what failed from their partial indexes, the
    /// delivered rows from the counters the triggers keep (migrations 0009 and 0018), so its cost
    /// does not grow with the delivered rows (a test checks its plan with a million of them).
    /// Redeliveries (`forward_redeliveries`, as many as an operator queued) count beside them.
    static func queueSummaryQuery() -> PostgresQuery {
        """
        SELECT (SELECT count(*) FROM forward_queue WHERE status IN ('pending', 'leased'))
                   + (SELECT count(*) FROM forward_redeliveries WHERE status IN ('pending', 'leased')),
               least((SELECT min(queued_at) FROM forward_queue WHERE status IN ('pending', 'leased')),
                     (SELECT min(queued_at) FROM forward_redeliveries WHERE status IN ('pending', 'leased'))),
               (SELECT count(*) FROM forward_queue WHERE status = 'failed') + (SELECT count(*) FROM forward_redeliveries WHERE status = 'failed'),
               (SELECT coalesce(sum(delivered), 0)::bigint FROM forward_queue_totals)
                   + (SELECT count(*) FROM forward_redeliveries WHERE status = 'delivered')
        """
    }

    /// How many failed deliveries failed because their payload cannot be rebuilt (``unrebuildablePayload``),
    /// of the whole queue (from the partial index of failed rows).
    func unrebuildableFailures(on transaction: DatabaseTransaction) async throws -> Int {
        let rows = try await transaction.query(
            "SELECT count(*) FROM forward_queue WHERE status = 'failed' AND starts_with(last_error, \(Self.unrebuildablePayload))",
            logger: logger)
        for try await count in rows.decode(Int.self) { return count }
        return 0
    }

    /// Where one app and environment's deliveries to one webhook stand (the gauges' labels).
    package struct TargetSummary: Sendable, Hashable {
        package var target: ForwardingTarget
        package var summary: ForwardingSummary

        package init(target: ForwardingTarget, summary: ForwardingSummary) {
            self.target = target
            self.summary = summary
        }
    }

    /// Where the deliveries of `app`'s notifications stand, per webhook they are queued for, as
    /// the gauges read them every minute (``appSummaryQuery(of:)``), by target id.
    package func forwardingSummaries(of app: AppTarget, on transaction: DatabaseTransaction) async throws -> [TargetSummary] {
        let rows = try await transaction.query(Self.appSummaryQuery(of: app), logger: logger)
        var summaries: [TargetSummary] = []
        for try await (id, redacted, pending, oldest, failed, delivered) in rows.decode((String, String, Int, Date?, Int, Int).self) {
            var summary = ForwardingSummary()
            (summary.pending, summary.oldestPending, summary.failed, summary.delivered) = (pending, oldest, failed, delivered)
            summaries.append(TargetSummary(target: ForwardingTarget(id: id, redacted: redacted), summary: summary))
        }
        return summaries
    }

    /// One app and environment's deliveries per webhook: what waits and what failed from their
    /// partial indexes, the delivered ones from the counter the triggers keep per app, environment
    /// and webhook (migration 0018), so its cost does not grow with the delivered rows; and its
    /// redeliveries (as many as an operator queued and pruning left), counted.
    static func appSummaryQuery(of app: AppTarget) -> PostgresQuery {
        let (bundleId, environment) = (app.bundleId, app.environment.rawValue)
        return """
            SELECT target_id, min(redacted), sum(pending)::bigint, min(oldest), sum(failed)::bigint, sum(delivered)::bigint FROM (
                SELECT target_id, min(target_redacted) AS redacted, count(*) AS pending, min(queued_at) AS oldest, 0 AS failed, 0 AS delivered
                FROM forward_queue WHERE status IN ('pending', 'leased') AND bundle_id = \(bundleId) AND environment = \(environment)
                GROUP BY target_id
                UNION ALL
                SELECT target_id, min(target_redacted), 0, NULL, count(*), 0
                FROM forward_queue WHERE status = 'failed' AND bundle_id = \(bundleId) AND environment = \(environment)
                GROUP BY target_id
                UNION ALL
                SELECT target_id, target_redacted, 0, NULL, 0, delivered
                FROM forward_queue_totals WHERE bundle_id = \(bundleId) AND environment = \(environment)
                UNION ALL
                SELECT target_id, min(target_redacted), count(*) FILTER (WHERE status IN ('pending', 'leased')),
                    min(queued_at) FILTER (WHERE status IN ('pending', 'leased')), count(*) FILTER (WHERE status = 'failed'),
                    count(*) FILTER (WHERE status = 'delivered')
                FROM forward_redeliveries WHERE bundle_id = \(bundleId) AND environment = \(environment)
                GROUP BY target_id
            ) per_status
            GROUP BY target_id ORDER BY target_id
            """
    }

    /// How many deliveries for `target` wait (or are being sent), of `runIds` (`nil`: any).
    func pendingDeliveries(target: ForwardingTarget, runIds: [Int64]?, on transaction: DatabaseTransaction) async throws -> Int {
        let rows = try await transaction.query(Self.pendingDeliveriesQuery(target: target, runIds: runIds), logger: logger)
        for try await count in rows.decode(Int.self) { return count }
        return 0
    }

    /// Read while a forwarder drains: from the partial index of what waits.
    /// Without `runIds`, the redeliveries that wait count too (they belong to no run).
    static func pendingDeliveriesQuery(target: ForwardingTarget, runIds: [Int64]?) -> PostgresQuery {
        """
        SELECT (SELECT count(*) FROM forward_queue
                WHERE status IN ('pending', 'leased') AND target_id = \(target.id) AND (\(runIds == nil) OR run_id = ANY(\(runIds ?? []))))
            + (SELECT count(*) FROM forward_redeliveries WHERE \(runIds == nil) AND status IN ('pending', 'leased') AND target_id = \(target.id))
        """
    }

    /// The runs whose deliveries for `target` are not delivered or failed yet, oldest first (the
    /// live webhook's deliveries are no run's).
    func runsWithWaitingDeliveries(target: ForwardingTarget, on transaction: DatabaseTransaction) async throws -> [Int64] {
        let rows = try await transaction.query(
            """
            SELECT DISTINCT run_id FROM forward_queue
            WHERE status IN ('pending', 'leased') AND target_id = \(target.id) AND run_id IS NOT NULL
            ORDER BY run_id
            """, logger: logger)
        var runIds: [Int64] = []
        for try await runId in rows.decode(Int64.self) { runIds.append(runId) }
        return runIds
    }

    /// The targets deliveries (and redeliveries) wait for, with how many each: a forwarder delivers
    /// only its own URL's, so the others wait for a process configured with theirs.
    package func waitingTargets(on transaction: DatabaseTransaction) async throws -> [(target: ForwardingTarget, pending: Int)] {
        let rows = try await transaction.query(
            """
            SELECT target_id, min(target_redacted), count(*) FROM (
                SELECT target_id, target_redacted FROM forward_queue WHERE status IN ('pending', 'leased')
                UNION ALL
                SELECT target_id, target_redacted FROM forward_redeliveries WHERE status IN ('pending', 'leased')
            ) waiting
            GROUP BY target_id ORDER BY target_id
            """, logger: logger)
        var targets: [(target: ForwardingTarget, pending: Int)] = []
        for try await (id, redacted, count) in rows.decode((String, String, Int).self) {
            targets.append((ForwardingTarget(id: id, redacted: redacted), count))
        }
        return targets
    }
}
