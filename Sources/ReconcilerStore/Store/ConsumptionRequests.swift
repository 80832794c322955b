package import AppStoreServer
package import Foundation
package import Logging
import PostgresNIO
package import ReconcilerDomain
package import ReconcilerShared

/// The SQL of the notifications Apple wants an answer to, consumption requests: reading them
/// (`notifications` rows with a deadline, `respond_by_ms`, written by ``NotificationLog``), the
/// answers sent for them (`consumption_answers`: written `sending` before Apple is called, then
/// completed) and the acks of those that need nothing more (`consumption_acks`); both written here
/// and nowhere else.
///
/// Whether a request is open or expired is judged against a `now` the caller passes (UNIX ms), so
/// a report, the metrics and the tests each decide their moment.
///
/// ```swift
/// let requests = ConsumptionRequests(logger: logger)
/// let open = try await database.transaction { try await requests.list(apps: nil, openAt: now, on: $0) }
/// ```
package struct ConsumptionRequests: Sendable {
    package let logger: Logger

    package init(logger: Logger) {
        self.logger = logger
    }

    /// One stored consumption request, with the answer Apple accepted for it and its ack, if any.
    package struct Request: Sendable, Hashable, Codable {
        package var notificationUUID: String
        package var bundleId: String
        package var environment: AppStoreEnvironment
        /// The transaction the customer asked a refund for: what Send Consumption Information names.
        package var transactionId: String?
        package var originalTransactionId: String?
        package var signedDate: Int64
        /// When Apple first tried to send it (`nil`: received live, the first attempt unknown).
        package var firstSentAt: Timestamp?
        /// The deadline for an answer, fixed when it was first recorded.
        package var respondBy: Timestamp
        /// The customer's reason (`UNINTENDED_PURCHASE`, `FULFILLMENT_ISSUE`, ...).
        package var reason: String?
        /// The run that recovered it (`nil`: the live webhook).
        package var runId: Int64?
        /// The live webhook received it first, as Apple sent it (no outage).
        package var live: Bool
        /// When an answer Apple accepted was sent.
        package var answeredAt: Date?
        /// Who sent that answer.
        package var answeredBy: ConsumptionAnsweredBy?
        /// The newest answer to it was written before Apple was called and its outcome never
        /// recorded: Apple may have it.
        package var sending: Bool
        /// When it was acked (`reconciler consumption ack`): it needs nothing more from the reconciler.
        package var ackedAt: Date?
        package var ackedBy: String?
        package var ackNote: String?

        /// Answered, acked, open or expired at `now`.
        package func state(at now: Timestamp) -> ConsumptionRequestDeadline.State {
            ConsumptionRequestDeadline.state(respondBy: respondBy, answered: answeredAt != nil, acked: ackedAt != nil, at: now)
        }
    }

    /// A request's rows: the notification, its ack, and the newest answer Apple accepted and the
    /// newest answer of all (whether one is being sent).
    private static let requestSource = """
        notifications n
        LEFT JOIN consumption_acks k ON k.notification_uuid = n.notification_uuid
        LEFT JOIN LATERAL (
            SELECT a.sent_at, a.answered_by FROM consumption_answers a
            WHERE a.notification_uuid = n.notification_uuid AND a.outcome = 'accepted' ORDER BY a.answer_id DESC LIMIT 1
        ) accepted ON true
        LEFT JOIN LATERAL (
            SELECT a.outcome FROM consumption_answers a WHERE a.notification_uuid = n.notification_uuid ORDER BY a.answer_id DESC LIMIT 1
        ) newest ON true
        """

    private static let requestColumns = """
        n.notification_uuid, n.bundle_id, n.environment, n.transaction_id, n.original_transaction_id, n.signed_date_ms,
        n.first_send_attempt_ms, n.respond_by_ms, n.consumption_request_reason, n.run_id, n.source = 'webhook' AS live,
        accepted.sent_at AS answered_at, accepted.answered_by, coalesce(newest.outcome = 'sending', false) AS sending,
        k.acked_at, k.acked_by, k.note AS ack_note
        """

    /// Neither answered (Apple accepted an answer) nor acked: the columns of ``requestSource``.
    private static let unsettled = "accepted.sent_at IS NULL AND k.notification_uuid IS NULL"

    private func request(_ row: PostgresRow) throws -> Request {
        let columns = NamedColumns(row)
        let answeredBy: String? = try columns["answered_by"]
        return Request(
            notificationUUID: try columns["notification_uuid"], bundleId: try columns["bundle_id"], environment: try columns["environment"],
            transactionId: try columns["transaction_id"], originalTransactionId: try columns["original_transaction_id"],
            signedDate: try columns["signed_date_ms"], firstSentAt: try columns["first_send_attempt_ms"], respondBy: try columns["respond_by_ms"],
            reason: try columns["consumption_request_reason"], runId: try columns["run_id"], live: try columns["live"],
            answeredAt: try columns["answered_at"], answeredBy: answeredBy.map(ConsumptionAnsweredBy.init(rawValue:)),
            sending: try columns["sending"], ackedAt: try columns["acked_at"], ackedBy: try columns["acked_by"], ackNote: try columns["ack_note"])
    }

    /// The requests of some apps and environments (`nil`: every one stored), soonest deadline
    /// first; with `openAt`, only those still waiting at that moment: neither answered nor acked
    /// nor past their deadline, and, when received live, of an app in `watchingLive` (`nil`: every
    /// app's live requests count; see ``ConsumptionSettings/LiveRequests``).
    package func list(
        apps: [AppTarget]?, openAt moment: Timestamp? = nil, watchingLive: [AppTarget]? = nil, limit: Int = 10_000,
        on transaction: DatabaseTransaction
    ) async throws -> [Request] {
        let scope = try PurchaseStore.scope(apps)
        let watching = try PurchaseStore.scope(watchingLive)
        let now = moment
        let rows = try await transaction.query(
            """
            SELECT \(unescaped: Self.requestColumns) FROM \(unescaped: Self.requestSource)
            WHERE n.respond_by_ms IS NOT NULL
              AND (\(scope)::jsonb IS NULL OR EXISTS (
                    SELECT 1 FROM jsonb_to_recordset(\(scope)::jsonb) AS s (bundle_id text, environment text)
                    WHERE s.bundle_id = n.bundle_id AND s.environment = n.environment))
              AND (\(now)::bigint IS NULL OR (n.respond_by_ms > \(now) AND \(unescaped: Self.unsettled)
                    AND (n.source <> 'webhook' OR \(watching)::jsonb IS NULL OR EXISTS (
                        SELECT 1 FROM jsonb_to_recordset(\(watching)::jsonb) AS s (bundle_id text, environment text)
                        WHERE s.bundle_id = n.bundle_id AND s.environment = n.environment))))
            ORDER BY n.respond_by_ms, n.notification_uuid
            LIMIT \(limit)
            """, logger: logger)
        var requests: [Request] = []
        for try await row in rows { requests.append(try request(row)) }
        return requests
    }

    /// The requests a run recorded for the first time: the first `limit` by soonest deadline,
    /// and how many there are in all and in each state at `now`.
    package struct RecordedByRun: Sendable {
        package var requests: [Request]
        package var total: Int
        package var open: Int
        package var expired: Int
        package var acked: Int
        package var answered: Int { total - open - expired - acked }
    }

    /// The requests a run recorded for the first time, soonest deadline first (at most `limit`),
    /// counted in all and by state at `now` (the counts are not limited).
    package func recorded(byRun runId: Int64, limit: Int, at now: Timestamp, on transaction: DatabaseTransaction) async throws -> RecordedByRun {
        let moment = now
        let rows = try await transaction.query(
            """
            WITH recorded AS (
                SELECT \(unescaped: Self.requestColumns) FROM \(unescaped: Self.requestSource)
                WHERE n.run_id = \(runId) AND n.respond_by_ms IS NOT NULL
            )
            SELECT *, count(*) OVER () AS total,
                count(*) FILTER (WHERE answered_at IS NULL AND acked_at IS NULL AND respond_by_ms > \(moment)) OVER () AS open,
                count(*) FILTER (WHERE answered_at IS NULL AND acked_at IS NULL AND respond_by_ms <= \(moment)) OVER () AS expired,
                count(*) FILTER (WHERE answered_at IS NULL AND acked_at IS NOT NULL) OVER () AS acked
            FROM recorded ORDER BY respond_by_ms, notification_uuid
            LIMIT \(limit)
            """, logger: logger)
        var recorded = RecordedByRun(requests: [], total: 0, open: 0, expired: 0, acked: 0)
        for try await row in rows {
            recorded.requests.append(try request(row))
            let columns = NamedColumns(row)
            (recorded.total, recorded.open, recorded.expired, recorded.acked) = (
                try columns["total"], try columns["open"], try columns["expired"], try columns["acked"]
            )
        }
        return recorded
    }

    /// Every stored request for `transactionId` in the apps and environments of `apps` (`nil`:
    /// every one), by app and environment, the newest first in each (where an answer goes).
    package func requests(forTransaction transactionId: String, apps: [AppTarget]?, on transaction: DatabaseTransaction) async throws -> [Request] {
        let scope = try PurchaseStore.scope(apps)
        let rows = try await transaction.query(
            """
            SELECT \(unescaped: Self.requestColumns) FROM \(unescaped: Self.requestSource)
            WHERE n.transaction_id = \(transactionId) AND n.respond_by_ms IS NOT NULL
              AND (\(scope)::jsonb IS NULL OR EXISTS (
                    SELECT 1 FROM jsonb_to_recordset(\(scope)::jsonb) AS s (bundle_id text, environment text)
                    WHERE s.bundle_id = n.bundle_id AND s.environment = n.environment))
            ORDER BY n.bundle_id, n.environment, n.signed_date_ms DESC, n.notification_uuid DESC
            """, logger: logger)
        var requests: [Request] = []
        for try await row in rows { requests.append(try request(row)) }
        return requests
    }

    /// What Apple's rules for an answer depend on, from the stored transaction: its product type
    /// (Apple's `type`), ownership (`FAMILY_SHARED`, `PURCHASED`) and product ID (which a
    /// consumption policy's `products` name); `nil` when it is not stored.
    package func transactionFacts(
        _ transactionId: String, of target: AppTarget, on transaction: DatabaseTransaction
    ) async throws -> (productType: ProductType?, ownership: InAppOwnershipType?, productId: String?)? {
        let rows = try await transaction.query(
            """
            SELECT product_type, in_app_ownership_type, product_id FROM transactions
            WHERE bundle_id = \(target.bundleId) AND environment = \(target.environment.rawValue) AND transaction_id = \(transactionId)
            """, logger: logger)
        for try await (type, ownership, productId) in rows.decode((String?, String?, String?).self) {
            return (type.map(ProductType.init(rawValue:)), ownership.map(InAppOwnershipType.init(rawValue:)), productId)
        }
        return nil
    }

    /// Where an answer stands (`consumption_answers.outcome`).
    package enum AnswerOutcome: String, Sendable, Codable, CaseIterable {
        /// Written before Apple is called; still there when what Apple said was never recorded.
        case sending
        /// 202: Apple received it.
        case accepted
        /// A 4xx: Apple refused it (its error code is kept).
        case refused
        /// 429, 5xx or no answer after the client's retries: send it again.
        case failed
    }

    /// An answer to send with Send Consumption Information.
    package struct Answer: Sendable {
        package var target: AppTarget
        package var transactionId: String
        /// The request it answers.
        package var notificationUUID: String
        package var body: ConsumptionRequest
        package var answeredBy: ConsumptionAnsweredBy
        /// This attempt: its row is completed by it.
        package var sendId: UUID

        package init(
            target: AppTarget, transactionId: String, notificationUUID: String, body: ConsumptionRequest,
            answeredBy: ConsumptionAnsweredBy = .command, sendId: UUID = UUID()
        ) {
            self.target = target
            self.transactionId = transactionId
            self.notificationUUID = notificationUUID
            self.body = body
            self.answeredBy = answeredBy
            self.sendId = sendId
        }
    }

    /// What Apple said to an answer.
    package struct Reply: Sendable, Hashable {
        package var outcome: AnswerOutcome
        package var httpStatus: Int?
        package var errorCode: Int64?
        package var errorMessage: String?

        package init(outcome: AnswerOutcome, httpStatus: Int? = nil, errorCode: Int64? = nil, errorMessage: String? = nil) {
            self.outcome = outcome
            self.httpStatus = httpStatus
            self.errorCode = errorCode
            self.errorMessage = errorMessage
        }
    }

    /// Why a request takes no answer unless sent again on purpose.
    package enum Settled: Sendable, Hashable {
        /// Apple accepted an answer to it.
        case answered(Request)
        /// It needs nothing more from the reconciler.
        case acked(Request)
        /// Its newest answer was written before Apple was called and what Apple said was never recorded.
        case sending(Request)
    }

    /// Writes `answer` as being sent (`sending`), before Apple is called, in a transaction of its
    /// own: no transaction is held while Apple answers. The request's row is locked while it is
    /// judged, so two senders cannot both pass. Unless `again`, a request answered, acked or
    /// being sent is not written and returned as such. Written once per `sendId` (a commit whose
    /// answer was lost, run again, changes nothing).
    package func beginAnswer(_ answer: Answer, again: Bool, on transaction: DatabaseTransaction) async throws -> Settled? {
        let sendId = answer.sendId
        let begun = try await transaction.query("SELECT 1 FROM consumption_answers WHERE send_id = \(sendId)", logger: logger)
        for try await _ in begun { return nil }
        let rows = try await transaction.query(
            """
            SELECT \(unescaped: Self.requestColumns) FROM \(unescaped: Self.requestSource)
            WHERE n.notification_uuid = \(answer.notificationUUID) AND n.respond_by_ms IS NOT NULL
            FOR UPDATE OF n
            """, logger: logger)
        var found: Request?
        for try await row in rows { found = try request(row) }
        guard let request = found else {
            throw ReconcilerError(.missingRow, "the consumption request \(answer.notificationUUID) is not stored")
        }
        if !again {
            if request.answeredAt != nil { return .answered(request) }
            if request.ackedAt != nil { return .acked(request) }
            if request.sending { return .sending(request) }
        }
        struct Row: Encodable {
            var bundle_id: String
            var environment: String
            var transaction_id: String
            var notification_uuid: String
            var customer_consented: Bool
            var delivery_status: String
            var sample_content_provided: Bool
            var refund_preference: String?
            var consumption_percentage: Int32?
            var outcome: String
            var send_id: UUID
            var answered_by: String
        }
        let body = answer.body
        let row = Row(
            bundle_id: answer.target.bundleId, environment: answer.target.environment.rawValue, transaction_id: answer.transactionId,
            notification_uuid: answer.notificationUUID, customer_consented: body.customerConsented, delivery_status: body.deliveryStatus.rawValue,
            sample_content_provided: body.sampleContentProvided, refund_preference: body.refundPreference?.rawValue,
            consumption_percentage: body.consumptionPercentage, outcome: AnswerOutcome.sending.rawValue, send_id: sendId,
            answered_by: answer.answeredBy.rawValue)
        try await transaction.query(
            """
            INSERT INTO consumption_answers (bundle_id, environment, transaction_id, notification_uuid, customer_consented, delivery_status,
                sample_content_provided, refund_preference, consumption_percentage, outcome, send_id, answered_by)
            SELECT bundle_id, environment, transaction_id, notification_uuid, customer_consented, delivery_status, sample_content_provided,
                refund_preference, consumption_percentage, outcome, send_id, answered_by
            FROM jsonb_populate_recordset(NULL::consumption_answers, \(try PurchaseStore.json([row]))::jsonb)
            """, logger: logger)
        return nil
    }

    /// Completes the answer ``beginAnswer(_:again:on:)`` wrote with what Apple said (after Apple
    /// answered: no transaction is held while it is sent).
    /// - Throws: ``ReconcilerError/Code/missingRow`` when no answer was begun with `sendId`.
    package func completeAnswer(_ sendId: UUID, with reply: Reply, on transaction: DatabaseTransaction) async throws {
        let rows = try await transaction.query(
            """
            UPDATE consumption_answers
            SET outcome = \(reply.outcome.rawValue), http_status = \(reply.httpStatus), error_code = \(reply.errorCode),
                error_message = \(reply.errorMessage)
            WHERE send_id = \(sendId)
            RETURNING answer_id
            """, logger: logger)
        for try await _ in rows { return }
        throw ReconcilerError(.missingRow, "the answer being sent (\(sendId)) is not stored")
    }

    /// Acks `requests` (all of one transaction): they need nothing more from the reconciler. A
    /// request acked before keeps its first ack. Returns the notification UUIDs this call acked.
    package func ack(
        _ requests: [Request], transactionId: String, by ackedBy: String, note: String?, on transaction: DatabaseTransaction
    ) async throws -> Set<String> {
        struct Row: Encodable {
            var notification_uuid: String
            var bundle_id: String
            var environment: String
            var transaction_id: String
            var acked_by: String
            var note: String?
        }
        let json = try PurchaseStore.json(
            requests.sorted { $0.notificationUUID < $1.notificationUUID }.map {
                Row(
                    notification_uuid: $0.notificationUUID, bundle_id: $0.bundleId, environment: $0.environment.rawValue,
                    transaction_id: transactionId,
                    acked_by: ackedBy, note: note)
            })
        let rows = try await transaction.query(
            """
            INSERT INTO consumption_acks (notification_uuid, bundle_id, environment, transaction_id, acked_by, note)
            SELECT notification_uuid, bundle_id, environment, transaction_id, acked_by, note
            FROM jsonb_to_recordset(\(json)::jsonb)
                AS r (notification_uuid text, bundle_id text, environment text, transaction_id text, acked_by text, note text)
            ORDER BY notification_uuid
            ON CONFLICT (notification_uuid) DO NOTHING
            RETURNING notification_uuid
            """, logger: logger)
        var acked: Set<String> = []
        for try await uuid in rows.decode(String.self) { acked.insert(uuid) }
        return acked
    }

    /// The open requests of one app and environment at `now`, for the gauges: how many are due
    /// within each of `bounds` (ms from now, ascending; the last count is of those due later), and
    /// the soonest deadline. Open: neither answered nor acked nor past the deadline, and, unless
    /// `watchingLive`, recovered by a run (not received live).
    package func openSummary(
        of target: AppTarget, at now: Int64, bounds: [Int64], watchingLive: Bool = true, on transaction: DatabaseTransaction
    ) async throws -> (counts: [Int], soonest: Int64?) {
        let rows = try await transaction.query(
            """
            SELECT width_bucket(n.respond_by_ms - \(now), \(bounds)::bigint[]) AS bucket, count(*) AS requests, min(n.respond_by_ms) AS soonest
            FROM \(unescaped: Self.requestSource)
            WHERE n.bundle_id = \(target.bundleId) AND n.environment = \(target.environment.rawValue)
              AND n.respond_by_ms > \(now) AND \(unescaped: Self.unsettled)
              AND (\(watchingLive) OR n.source <> 'webhook')
            GROUP BY 1
            """, logger: logger)
        var counts = [Int](repeating: 0, count: bounds.count + 1)
        var soonest: Int64?
        for try await row in rows {
            let columns = NamedColumns(row)
            // width_bucket: 0 below the first bound, i from bounds[i-1] on (and below bounds[i]).
            let bucket: Int32 = try columns["bucket"]
            let index = min(max(Int(bucket), 0), bounds.count)
            counts[index] += try columns["requests"] as Int
            let first: Int64 = try columns["soonest"]
            soonest = min(soonest ?? first, first)
        }
        return (counts, soonest)
    }
}

extension ConsumptionRequests.Request {
    /// The app and environment the request was stored for.
    package var app: AppTarget { AppTarget(bundleId: bundleId, environment: environment) }
}
