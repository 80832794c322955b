package import AppStoreServer
package import Foundation
package import Logging
import PostgresNIO
package import ReconcilerDomain
package import ReconcilerShared

/// The SQL of the notifications Apple wants an answer to, consumption requests: reading them
/// (`notifications` rows with a deadline, `respond_by_ms`, written by ``NotificationLog``), and the
/// answers sent for them (`consumption_answers`, written here and nowhere else).
///
/// Whether a request is open or expired is judged against a `now` the caller passes (UNIX ms), so
/// a report, the metrics and the tests each decide their moment.
///
/// ```swift
/// let requests = ConsumptionRequests(logger: logger)
/// let open = try await database.transaction { try await requests.list(apps: nil, at: now, on: $0) }.filter { $0.state(at: now) == .open }
/// ```
package struct ConsumptionRequests: Sendable {
    package let logger: Logger

    package init(logger: Logger) {
        self.logger = logger
    }

    /// One stored consumption request, with the answer Apple accepted for it, if any.
    package struct Request: Sendable, Hashable, Codable {
        package var notificationUUID: String
        package var bundleId: String
        package var environment: String
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
        /// When an answer Apple accepted was sent.
        package var answeredAt: Date?

        /// Answered, open or expired at `now`.
        package func state(at now: Timestamp) -> ConsumptionRequestDeadline.State {
            ConsumptionRequestDeadline.state(respondBy: respondBy, answered: answeredAt != nil, at: now)
        }
    }

    private static let requestColumns = """
        n.notification_uuid, n.bundle_id, n.environment, n.transaction_id, n.original_transaction_id, n.signed_date_ms,
        n.first_send_attempt_ms, n.respond_by_ms, n.consumption_request_reason, n.run_id,
        (SELECT max(a.sent_at) FROM consumption_answers a WHERE a.notification_uuid = n.notification_uuid AND a.outcome = 'accepted') AS answered_at
        """

    private func request(_ row: PostgresRow) throws -> Request {
        let columns = NamedColumns(row)
        return Request(
            notificationUUID: try columns["notification_uuid"], bundleId: try columns["bundle_id"], environment: try columns["environment"],
            transactionId: try columns["transaction_id"], originalTransactionId: try columns["original_transaction_id"],
            signedDate: try columns["signed_date_ms"], firstSentAt: try columns["first_send_attempt_ms"], respondBy: try columns["respond_by_ms"],
            reason: try columns["consumption_request_reason"], runId: try columns["run_id"], answeredAt: try columns["answered_at"])
    }

    /// The requests of some apps and environments (`nil`: every one stored), soonest deadline
    /// first; with `openAt`, only those neither answered nor past their deadline at that moment.
    package func list(
        apps: [AppTarget]?, openAt moment: Timestamp? = nil, limit: Int = 10_000, on transaction: DatabaseTransaction
    ) async throws -> [Request] {
        let scope = try PurchaseStore.scope(apps)
        let now = moment?.millisecondsSince1970
        let rows = try await transaction.query(
            """
            SELECT \(unescaped: Self.requestColumns) FROM notifications n
            WHERE n.respond_by_ms IS NOT NULL
              AND (\(scope)::jsonb IS NULL OR EXISTS (
                    SELECT 1 FROM jsonb_to_recordset(\(scope)::jsonb) AS s (bundle_id text, environment text)
                    WHERE s.bundle_id = n.bundle_id AND s.environment = n.environment))
              AND (\(now)::bigint IS NULL OR (n.respond_by_ms > \(now) AND NOT EXISTS (
                    SELECT 1 FROM consumption_answers a WHERE a.notification_uuid = n.notification_uuid AND a.outcome = 'accepted')))
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
        package var answered: Int { total - open - expired }
    }

    /// The requests a run recorded for the first time, soonest deadline first (at most `limit`),
    /// counted in all and by state at `now` (the counts are not limited).
    package func recorded(byRun runId: Int64, limit: Int, at now: Timestamp, on transaction: DatabaseTransaction) async throws -> RecordedByRun {
        let moment = now.millisecondsSince1970
        let rows = try await transaction.query(
            """
            WITH recorded AS (
                SELECT \(unescaped: Self.requestColumns) FROM notifications n
                WHERE n.run_id = \(runId) AND n.respond_by_ms IS NOT NULL
            )
            SELECT *, count(*) OVER () AS total,
                count(*) FILTER (WHERE answered_at IS NULL AND respond_by_ms > \(moment)) OVER () AS open,
                count(*) FILTER (WHERE answered_at IS NULL AND respond_by_ms <= \(moment)) OVER () AS expired
            FROM recorded ORDER BY respond_by_ms, notification_uuid
            LIMIT \(limit)
            """, logger: logger)
        var recorded = RecordedByRun(requests: [], total: 0, open: 0, expired: 0)
        for try await row in rows {
            recorded.requests.append(try request(row))
            let columns = NamedColumns(row)
            (recorded.total, recorded.open, recorded.expired) = (try columns["total"], try columns["open"], try columns["expired"])
        }
        return recorded
    }

    /// The newest stored request for `transactionId` in each app and environment of `apps` (`nil`:
    /// every one): where an answer for that transaction goes.
    package func newest(forTransaction transactionId: String, apps: [AppTarget]?, on transaction: DatabaseTransaction) async throws -> [Request] {
        let scope = try PurchaseStore.scope(apps)
        let rows = try await transaction.query(
            """
            SELECT DISTINCT ON (n.bundle_id, n.environment) \(unescaped: Self.requestColumns) FROM notifications n
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
    /// (Apple's `type`) and ownership (`FAMILY_SHARED`, `PURCHASED`); `nil` when it is not stored.
    package func transactionFacts(
        _ transactionId: String, of target: AppTarget, on transaction: DatabaseTransaction
    ) async throws -> (productType: ProductType?, ownership: InAppOwnershipType?)? {
        let rows = try await transaction.query(
            """
            SELECT product_type, in_app_ownership_type FROM transactions
            WHERE bundle_id = \(target.bundleId) AND environment = \(target.environment.rawValue) AND transaction_id = \(transactionId)
            """, logger: logger)
        for try await (type, ownership) in rows.decode((String?, String?).self) {
            return (type.map(ProductType.init(rawValue:)), ownership.map(InAppOwnershipType.init(rawValue:)))
        }
        return nil
    }

    /// What Apple said to an answer.
    package enum AnswerOutcome: String, Sendable, Codable, CaseIterable {
        /// 202: Apple received it.
        case accepted
        /// A 4xx: Apple refused it (its error code is kept).
        case refused
        /// 429, 5xx or no answer after the client's retries: send it again.
        case failed
    }

    /// An answer sent with Send Consumption Information, and what Apple said.
    package struct Answer: Sendable {
        package var target: AppTarget
        package var transactionId: String
        /// The request it answers.
        package var notificationUUID: String
        package var body: ConsumptionRequest
        package var outcome: AnswerOutcome
        package var httpStatus: Int?
        package var errorCode: Int64?
        package var errorMessage: String?

        package init(
            target: AppTarget, transactionId: String, notificationUUID: String, body: ConsumptionRequest, outcome: AnswerOutcome,
            httpStatus: Int? = nil, errorCode: Int64? = nil, errorMessage: String? = nil
        ) {
            self.target = target
            self.transactionId = transactionId
            self.notificationUUID = notificationUUID
            self.body = body
            self.outcome = outcome
            self.httpStatus = httpStatus
            self.errorCode = errorCode
            self.errorMessage = errorMessage
        }
    }

    /// Records an answer (after Apple answered: no transaction is held while it is sent).
    package func record(_ answer: Answer, on transaction: DatabaseTransaction) async throws {
        struct Row: Encodable {
            package var bundle_id: String
            package var environment: String
            package var transaction_id: String
            package var notification_uuid: String
            package var customer_consented: Bool
            package var delivery_status: String
            package var sample_content_provided: Bool
            package var refund_preference: String?
            package var consumption_percentage: Int32?
            package var outcome: String
            package var http_status: Int?
            package var error_code: Int64?
            package var error_message: String?
        }
        let body = answer.body
        let row = Row(
            bundle_id: answer.target.bundleId, environment: answer.target.environment.rawValue, transaction_id: answer.transactionId,
            notification_uuid: answer.notificationUUID, customer_consented: body.customerConsented, delivery_status: body.deliveryStatus.rawValue,
            sample_content_provided: body.sampleContentProvided, refund_preference: body.refundPreference?.rawValue,
            consumption_percentage: body.consumptionPercentage, outcome: answer.outcome.rawValue, http_status: answer.httpStatus,
            error_code: answer.errorCode, error_message: answer.errorMessage)
        try await transaction.query(
            """
            INSERT INTO consumption_answers (bundle_id, environment, transaction_id, notification_uuid, customer_consented, delivery_status,
                sample_content_provided, refund_preference, consumption_percentage, outcome, http_status, error_code, error_message)
            SELECT bundle_id, environment, transaction_id, notification_uuid, customer_consented, delivery_status, sample_content_provided,
                refund_preference, consumption_percentage, outcome, http_status, error_code, error_message
            FROM jsonb_populate_recordset(NULL::consumption_answers, \(try PurchaseStore.json([row]))::jsonb)
            """, logger: logger)
    }

    /// The open requests of one app and environment at `now`, for the gauges: how many are due
    /// within each of `bounds` (ms from now, ascending; the last count is of those due later), and
    /// the soonest deadline.
    package func openSummary(
        of target: AppTarget, at now: Int64, bounds: [Int64], on transaction: DatabaseTransaction
    ) async throws -> (counts: [Int], soonest: Int64?) {
        let rows = try await transaction.query(
            """
            SELECT width_bucket(n.respond_by_ms - \(now), \(bounds)::bigint[]) AS bucket, count(*) AS requests, min(n.respond_by_ms) AS soonest
            FROM notifications n
            WHERE n.bundle_id = \(target.bundleId) AND n.environment = \(target.environment.rawValue)
              AND n.respond_by_ms > \(now)
              AND NOT EXISTS (SELECT 1 FROM consumption_answers a WHERE a.notification_uuid = n.notification_uuid AND a.outcome = 'accepted')
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
