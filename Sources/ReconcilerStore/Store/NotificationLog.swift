package import AppStoreServer
package import Foundation
package import Logging
import PostgresNIO
package import ReconcilerDomain
package import ReconcilerShared

/// The SQL of `notifications`: every notification this system recorded, live or replayed, once
/// by its `notificationUUID`, with its outcome and (until pruned) Apple's signed payload. A
/// notification recorded for the first time can be queued for the app's own webhook by the same
/// statement (`forward_queue`), so it is forwarded exactly when it is recorded.
///
/// ```swift
/// let inserted = try await store.notifications.insert(rows, source: .webhook, on: transaction)
/// ```
package struct NotificationLog: Sendable {
    package let logger: Logger
    /// The app and environment whose notifications this log records (`nil` for one that only reads).
    package let target: AppTarget?
    /// The headers known to be stored: those are only checked, not sent again (see ``PurchaseStore``).
    let storedHeaders: StoredHeaders?

    package init(logger: Logger, target: AppTarget? = nil) {
        self.init(logger: logger, target: target, storedHeaders: nil)
    }

    init(logger: Logger, target: AppTarget?, storedHeaders: StoredHeaders?) {
        self.logger = logger
        self.target = target
        self.storedHeaders = storedHeaders
    }

    /// Where a notification came from.
    package enum Source: Sendable, Hashable {
        case webhook
        /// Replayed from Get Notification History by a reconcile run.
        case history(runId: Int64)

        package var name: String {
            switch self {
            case .webhook: "webhook"
            case .history: "history"
            }
        }

        package var runId: Int64? {
            switch self {
            case .webhook: nil
            case .history(let runId): runId
            }
        }
    }

    /// A notification to record, with the outcome to record it under.
    package struct NotificationRow: Sendable {
        package var notification: VerifiedNotification
        package var outcome: HandlingResult.Outcome

        package init(notification: VerifiedNotification, outcome: HandlingResult.Outcome) {
            self.notification = notification
            self.outcome = outcome
        }
    }

    /// One row of `notifications`; the keys are its column names.
    private struct NotificationColumns: Encodable {
        var notification_uuid: String
        var notification_type: String
        var subtype: String?
        var signed_date_ms: Int64
        var bundle_id: String
        var environment: String
        var original_transaction_id: String?
        var transaction_id: String?
        var source: String
        var run_id: Int64?
        var outcome: String
        var first_send_attempt_ms: Int64?
        var respond_by_ms: Int64?
        var consumption_request_reason: String?
        /// The columns that hold the signed payload, in the same JSON object.
        var stored: PayloadColumns

        private enum CodingKeys: String, CodingKey {
            case notification_uuid, notification_type, subtype, signed_date_ms, bundle_id, environment, original_transaction_id,
                transaction_id, source, run_id, outcome, first_send_attempt_ms, respond_by_ms, consumption_request_reason
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(notification_uuid, forKey: .notification_uuid)
            try container.encode(notification_type, forKey: .notification_type)
            try container.encodeIfPresent(subtype, forKey: .subtype)
            try container.encode(signed_date_ms, forKey: .signed_date_ms)
            try container.encode(bundle_id, forKey: .bundle_id)
            try container.encode(environment, forKey: .environment)
            try container.encodeIfPresent(original_transaction_id, forKey: .original_transaction_id)
            try container.encodeIfPresent(transaction_id, forKey: .transaction_id)
            try container.encode(source, forKey: .source)
            try container.encodeIfPresent(run_id, forKey: .run_id)
            try container.encode(outcome, forKey: .outcome)
            try container.encodeIfPresent(first_send_attempt_ms, forKey: .first_send_attempt_ms)
            try container.encodeIfPresent(respond_by_ms, forKey: .respond_by_ms)
            try container.encodeIfPresent(consumption_request_reason, forKey: .consumption_request_reason)
            try stored.encode(to: encoder)
        }
    }

    /// The columns of `notifications` that hold a signed payload; the keys are their names.
    struct PayloadColumns: Encodable {
        var notification_uuid: String
        var payload_form: String
        var payload_sha256: String
        /// The whole JWS, only when its parts would not rebuild it exactly.
        var signed_payload: String?
        var header_sha256: String?
        var payload: String?
        var signature: String?
        var transaction_offset: Int?
        var transaction_signature: String?
        var transaction_header_sha256: String?
        var renewal_offset: Int?
        var renewal_signature: String?
        var renewal_header_sha256: String?

        /// The signed payload as stored: taken apart (``NotificationStorage``), or whole when
        /// the parts would not rebuild it byte for byte.
        init(notificationUUID: String, signedPayload: String, storage: NotificationStorage?) {
            notification_uuid = notificationUUID
            payload_sha256 = Bytea.hex(JWSParts.sha256(signedPayload))
            guard let storage else {
                (payload_form, signed_payload) = (PayloadForm.whole.rawValue, signedPayload)
                return
            }
            let notification = storage.parts.notification
            payload_form = PayloadForm.parts.rawValue
            header_sha256 = Bytea.hex(notification.headerSHA256)
            payload = Bytea.hex(storage.payloads.deflated)
            signature = Bytea.hex(notification.signature)
            for nested in storage.parts.nested {
                // The header is named only when it is not the notification's own.
                let header = nested.parts.headerSHA256 == notification.headerSHA256 ? nil : Bytea.hex(nested.parts.headerSHA256)
                let signature = Bytea.hex(nested.parts.signature)
                switch nested.field {
                case .signedTransactionInfo:
                    (transaction_offset, transaction_signature, transaction_header_sha256) = (nested.offset, signature, header)
                case .signedRenewalInfo:
                    (renewal_offset, renewal_signature, renewal_header_sha256) = (nested.offset, signature, header)
                }
            }
        }

        /// The payload columns, for a statement that sets them.
        static let names = """
            payload_form, payload_sha256, signed_payload, header_sha256, payload, signature,
            transaction_offset, transaction_signature, transaction_header_sha256, renewal_offset, renewal_signature, renewal_header_sha256
            """
    }

    /// Records notifications; returns the UUIDs that were new (the others are duplicates). With
    /// `forwarding`, the new ones it selects are queued for the app's webhook by the same statement,
    /// each with its deadline (so the forwarder sends the open ones first); with
    /// ``Forwarding/hold``, those without an open deadline are held back (see ``Forwarding``).
    ///
    /// A notification's deadline (`respond_by_ms`) and first send attempt are written with it and
    /// never change: a copy recorded again later is a duplicate.
    package func insert(
        _ rows: [NotificationRow], source: Source, forwarding: Forwarding? = nil, on transaction: DatabaseTransaction
    ) async throws -> Set<String> {
        guard !rows.isEmpty else { return [] }
        guard let target else {
            throw ReconcilerError(.missingApp, "a notification was recorded without naming its app")
        }
        let (bundleId, environment) = (target.bundleId, target.environment)
        var wholeUUIDs: [String] = []
        let columns = rows.map { row in
            let n = row.notification
            if n.storage == nil { wholeUUIDs.append(n.notificationUUID) }
            return NotificationColumns(
                notification_uuid: n.notificationUUID, notification_type: n.notificationType.rawValue, subtype: n.subtype?.rawValue,
                signed_date_ms: n.signedDate, bundle_id: bundleId, environment: environment.rawValue,
                original_transaction_id: n.originalTransactionId, transaction_id: n.transaction?.transactionId, source: source.name,
                run_id: source.runId, outcome: row.outcome.rawValue, first_send_attempt_ms: n.firstSendAttempt,
                respond_by_ms: n.respondBy?.millisecondsSince1970,
                consumption_request_reason: n.payload.data?.consumptionRequestReason?.rawValue,
                stored: PayloadColumns(notificationUUID: n.notificationUUID, signedPayload: n.signedPayload, storage: n.storage))
        }
        if !wholeUUIDs.isEmpty {
            // Apple's values always rebuild; one that does not is kept whole and counted (`verify-stored`).
            logger.warning(
                "a notification's signed payload does not rebuild exactly from its parts: stored whole",
                metadata: ["notificationUUIDs": "\(wholeUUIDs)"])
        }
        let json = try PurchaseStore.json(columns)
        let parts = rows.flatMap(\.notification.signedParts)
        let headers = try PurchaseStore.json(JWSHeaders.rows(for: parts, knowing: storedHeaders))
        let query = InsertNotificationsSQL.query(
            headers: headers, rows: json, forwarding: forwarding, runId: source.runId, bundleId: bundleId, environment: environment)
        let result = try await transaction.query(query, preparedAs: InsertNotificationsSQL.self, logger: logger)
        var (inserted, missingHeaders) = (Set<String>(), [String]())
        for try await (uuid, missing) in result.decode((String?, String?).self) {
            if let uuid { inserted.insert(uuid) }
            if let missing { missingHeaders.append(missing) }
        }
        try await JWSHeaders(logger: logger).restore(missingHeaders, of: parts, stored: storedHeaders, on: transaction)
        return inserted
    }

    /// Records as `recorded` notifications first recorded as `applied` whose data, once applied,
    /// changed no purchase (what was in them was stored already): the run's counts, the report
    /// page and the feed then agree on what changed a purchase. In the caller's transaction, right
    /// after ``insert``.
    package func markRecordedOnly(_ notificationUUIDs: [String], on transaction: DatabaseTransaction) async throws {
        guard !notificationUUIDs.isEmpty else { return }
        let (recorded, applied) = (HandlingResult.Outcome.recorded.rawValue, HandlingResult.Outcome.applied.rawValue)
        try await transaction.query(
            """
            UPDATE notifications SET outcome = \(recorded)
            WHERE notification_uuid = ANY(\(notificationUUIDs.sorted())) AND outcome = \(applied)
            """, logger: logger)
    }

    static let notificationColumns = """
        notification_uuid, notification_type, subtype, signed_date_ms, bundle_id, environment, original_transaction_id, transaction_id,
        source, run_id, outcome, first_send_attempt_ms, respond_by_ms, consumption_request_reason, \(PayloadColumns.names)
        """

    /// When a run's replay recorded the last of the notifications of these types (`received_at`).
    package func lastRecorded(runId: Int64, types: [String], on transaction: DatabaseTransaction) async throws -> Date? {
        let rows = try await transaction.query(
            """
            SELECT max(received_at) FROM notifications WHERE run_id = \(runId) AND notification_type = ANY(\(types)::text[])
            """, logger: logger)
        for try await value in rows.decode(Date?.self) { return value }
        return nil
    }

    /// Whether a notification is recorded.
    package func hasNotification(uuid: String, on transaction: DatabaseTransaction) async throws -> Bool {
        let rows = try await transaction.query("SELECT 1 FROM notifications WHERE notification_uuid = \(uuid)", logger: logger)
        for try await _ in rows { return true }
        return false
    }

    /// The signedDate of the newest notification the live webhook stored, for `run --since-last`.
    package func newestLive(of target: AppTarget, on transaction: DatabaseTransaction) async throws -> Timestamp? {
        let rows = try await transaction.query(
            """
            SELECT max(signed_date_ms) FROM notifications
            WHERE source = 'webhook' AND bundle_id = \(target.bundleId) AND environment = \(target.environment)
            """, logger: logger)
        for try await value in rows.decode(Timestamp?.self) { return value }
        return nil
    }

    /// Where to forward recorded notifications, and which: each webhook of the app (``routes``, one
    /// queue row each) gets each one this system records for the first time whose type it takes,
    /// unless `only` names the ones to forward (a replay forwards those Apple did not deliver).
    ///
    /// With `hold`, a delivery whose notification has no open deadline (all but the consumption
    /// requests still before theirs) waits: it is due only after `hold`, or when its run releases it
    /// (``ForwardQueue/releaseHeldDeliveries(runId:)``) once the run's query of consumption requests
    /// is done, so the app hears of those first. The live webhook never holds.
    package struct Forwarding: Sendable, Hashable {
        /// The webhooks the queue rows name (an id and the redacted URL, never the URL itself), each
        /// with the types it takes.
        package var routes: [ForwardingRoute]
        package var only: Set<String>?
        /// Hold deliveries without an open deadline back for at most this long.
        package var hold: Duration?

        package init(routes: [ForwardingRoute], only: Set<String>? = nil, hold: Duration? = nil) {
            self.routes = routes
            self.only = only
            self.hold = hold
        }

        /// Every notification to one webhook.
        package init(target: ForwardingTarget, only: Set<String>? = nil, hold: Duration? = nil) {
            self.init(routes: [ForwardingRoute(target: target)], only: only, hold: hold)
        }
    }

    /// The routes as the insert binds them: `[{id, redacted, types}]` (`types` null: every one).
    struct RouteColumns: Encodable {
        var id: String
        var redacted: String
        var types: [String]?
    }
}

/// ``NotificationLog/insert(_:source:forwarding:on:)``'s statement, prepared (``PreparedSQL``).
private enum InsertNotificationsSQL: PreparedSQL {
    static func query(
        headers: String, rows json: String, forwarding: NotificationLog.Forwarding?, runId: Int64?, bundleId: String, environment: AppStoreEnvironment
    ) -> PostgresQuery {
        let only = forwarding?.only.map { Array($0).sorted() }
        let holdMilliseconds = forwarding?.hold.map(\.milliseconds)
        let routes = forwarding.map { forwarding in
            (try? PurchaseStore.json(
                forwarding.routes.map { NotificationLog.RouteColumns(id: $0.target.id, redacted: $0.target.redacted, types: $0.types?.written) }))
                ?? "[]"
        }
        // A route's `types`: TYPE takes every subtype, TYPE/SUBTYPE that subtype (NotificationTypeFilter).
        return
            """
            WITH headers AS (
                \(insertingHeaders: headers)
            ), missing_headers AS (
                \(unescaped: JWSHeaders.missingSQL(parameter: "$1"))
            ), inserted AS (
                INSERT INTO notifications (\(unescaped: NotificationLog.notificationColumns))
                SELECT \(unescaped: NotificationLog.notificationColumns) FROM jsonb_populate_recordset(NULL::notifications, \(json)::jsonb)
                ON CONFLICT (notification_uuid) DO NOTHING
                RETURNING notification_uuid, respond_by_ms, notification_type, subtype
            ), deliveries AS (
                SELECT notification_uuid, respond_by_ms, r.id AS target_id, r.redacted AS target_redacted,
                       \(holdMilliseconds)::bigint IS NOT NULL
                           AND NOT coalesce(respond_by_ms > (extract(epoch FROM now()) * 1000)::bigint, false) AS held
                FROM inserted
                CROSS JOIN jsonb_to_recordset(coalesce(\(routes)::jsonb, '[]'::jsonb)) AS r(id text, redacted text, types text[])
                WHERE (\(only)::text[] IS NULL OR notification_uuid = ANY(\(only)::text[]))
                    AND (r.types IS NULL OR notification_type = ANY(r.types) OR notification_type || '/' || subtype = ANY(r.types))
            ), queued AS (
                INSERT INTO forward_queue (notification_uuid, target_id, target_redacted, run_id, bundle_id, environment, respond_by_ms, held,
                    next_attempt_at)
                SELECT notification_uuid, target_id, target_redacted, \(runId), \(bundleId), \(environment),
                    respond_by_ms, held, CASE WHEN held THEN now() + \(holdMilliseconds) * interval '1 millisecond' ELSE now() END
                FROM deliveries
                ORDER BY notification_uuid, target_id
                ON CONFLICT (notification_uuid, target_id) DO NOTHING
            )
            SELECT notification_uuid, NULL::text FROM inserted
            UNION ALL SELECT NULL, sha256 FROM missing_headers
            """
    }

    static let sql = query(headers: "", rows: "", forwarding: nil, runId: nil, bundleId: "", environment: AppStoreEnvironment(rawValue: "")).sql
    /// Headers (`$1`, which `missing_headers` reads too), rows, hold, routes, only (twice), run,
    /// bundle, environment, hold.
    static let bindingTypes: [PostgresDataType] = [.text, .text, .int8, .text, .textArray, .textArray, .int8, .text, .text, .int8]
}
