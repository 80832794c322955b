package import AppStoreServer
package import Foundation
import Logging
import PostgresNIO
package import ReconcilerDomain

/// The quarantine: signed values from Apple's API that failed verification. Each is stored once
/// (by its SHA-256), never applied, and counted by every run that meets it; only the first run
/// to meet it reports it as new, so one bad payload never holds the schedule back.
extension RunLedger {
    /// Records the rejections a page met, in the page's transaction: quarantines the new ones
    /// (in a dry run only notes which would be new) and lists all of them under the run. Returns
    /// them with ``Rejection/newlyQuarantined`` set. Without a run (`runId` `nil`: the app API's
    /// refreshes) they are quarantined alone, new when not quarantined before.
    package func quarantine(
        _ rejections: [Rejection], runId: Int64?, app: AppTarget, dryRun: Bool,
        on transaction: DatabaseTransaction
    ) async throws -> [Rejection] {
        guard !rejections.isEmpty else { return [] }
        let unique = Dictionary(rejections.map { ($0.payloadSHA256, $0) }, uniquingKeysWith: { first, _ in first })
        let hashes = unique.keys.sorted()
        // Known before this run met it: already quarantined by an earlier run.
        let known = try await transaction.query(
            """
            SELECT payload_sha256 FROM quarantined_payloads
            WHERE payload_sha256 = ANY(\(hashes)::text[]) AND (\(runId)::bigint IS NULL OR first_run_id IS DISTINCT FROM \(runId))
            """, logger: logger)
        var knownHashes = Set<String>()
        for try await hash in known.decode(String.self) { knownHashes.insert(hash) }
        let result = hashes.map { hash in
            var rejection = unique[hash]!
            rejection.newlyQuarantined = !knownHashes.contains(hash)
            return rejection
        }
        struct Row: Encodable {
            var payload_sha256: String
            var environment: String
            var bundle_id: String
            var source: String
            var notification_uuid: String?
            var type_and_subtype: String?
            var reason: String
            var detail: String
            var signed_payload: String
            var newly_quarantined: Bool
        }
        let rows = try PurchaseStore.json(
            result.map {
                Row(
                    payload_sha256: $0.payloadSHA256, environment: app.environment.rawValue, bundle_id: app.bundleId, source: $0.source.rawValue,
                    notification_uuid: $0.notificationUUID, type_and_subtype: $0.typeAndSubtype, reason: $0.reason.rawValue,
                    detail: $0.detail, signed_payload: $0.signedPayload, newly_quarantined: $0.newlyQuarantined)
            })
        if !dryRun {
            try await transaction.query(
                """
                INSERT INTO quarantined_payloads AS q (payload_sha256, environment, bundle_id, source, notification_uuid, type_and_subtype,
                    reason, detail, signed_payload, first_run_id, last_run_id)
                SELECT payload_sha256, environment, bundle_id, source, notification_uuid, type_and_subtype, reason, detail, signed_payload,
                    \(runId), \(runId)
                FROM jsonb_to_recordset(\(rows)::jsonb) AS r (payload_sha256 text, environment text, bundle_id text, source text,
                    notification_uuid text, type_and_subtype text, reason text, detail text, signed_payload text)
                ORDER BY payload_sha256
                ON CONFLICT (payload_sha256) DO UPDATE SET last_seen_at = now(), last_run_id = COALESCE(EXCLUDED.last_run_id, q.last_run_id),
                    times_seen = q.times_seen
                        + CASE WHEN EXCLUDED.last_run_id IS NULL OR q.last_run_id IS DISTINCT FROM EXCLUDED.last_run_id THEN 1 ELSE 0 END
                """, logger: logger)
        }
        guard let runId else { return result.map(\.withoutPayload) }
        try await transaction.query(
            """
            INSERT INTO run_rejections (run_id, payload_sha256, source, notification_uuid, type_and_subtype, reason, detail, newly_quarantined)
            SELECT \(runId), payload_sha256, source, notification_uuid, type_and_subtype, reason, detail, newly_quarantined
            FROM jsonb_to_recordset(\(rows)::jsonb) AS r (payload_sha256 text, source text, notification_uuid text, type_and_subtype text,
                reason text, detail text, newly_quarantined boolean)
            ON CONFLICT (run_id, payload_sha256) DO NOTHING
            """, logger: logger)
        return result.map(\.withoutPayload)
    }

    /// The rejections a run met, in the order it met them.
    package func rejections(runId: Int64) async throws -> [Rejection] {
        try await read { [logger] transaction in
            let rows = try await transaction.query(
                """
                SELECT source, notification_uuid, type_and_subtype, reason, detail, payload_sha256, newly_quarantined
                FROM run_rejections WHERE run_id = \(runId) ORDER BY recorded_at, payload_sha256
                """, logger: logger)
            var result: [Rejection] = []
            for try await row in rows.decode((String, String?, String?, String, String, String, Bool).self) {
                result.append(
                    Rejection(
                        source: try ReconcilerError.stored(row.0, in: "run_rejections.source"), notificationUUID: row.1, typeAndSubtype: row.2,
                        reason: try ReconcilerError.stored(row.3, in: "run_rejections.reason"), detail: row.4, payloadSHA256: row.5,
                        newlyQuarantined: row.6))
            }
            return result
        }
    }

    /// One quarantined payload, as `reconciler rejections` lists it.
    package struct QuarantinedPayload: Sendable, Codable, Hashable {
        package var payloadSHA256: String
        package var source: Rejection.Source
        package var notificationUUID: String?
        package var typeAndSubtype: String?
        package var reason: VerificationError.Reason
        package var detail: String
        package var firstSeenAt: Date
        package var lastSeenAt: Date
        var firstRunId: Int64?
        var lastRunId: Int64?
        package var timesSeen: Int
        package var acknowledgedAt: Date?
        package var acknowledgedNote: String?
    }

    /// The quarantine of an app and environment, oldest first; unacknowledged ones only unless `all`.
    package func quarantinedPayloads(app: AppTarget, all: Bool) async throws -> [QuarantinedPayload] {
        try await quarantinedPayloads(bundleId: app.bundleId, environment: app.environment, all: all)
    }

    /// What the webhook quarantined without being able to read its app (stored with an empty
    /// bundle and environment), oldest first; unacknowledged ones only unless `all`.
    package func unattributedQuarantinedPayloads(all: Bool) async throws -> [QuarantinedPayload] {
        try await quarantinedPayloads(bundleId: nil, environment: nil, all: all)
    }

    // A row of an unreadable app is stored with an empty bundle and environment.
    private func quarantinedPayloads(bundleId: String?, environment: AppStoreEnvironment?, all: Bool) async throws -> [QuarantinedPayload] {
        let (bundleId, environment) = (bundleId ?? "", environment?.rawValue ?? "")
        return try await read { [logger] transaction in
            let rows = try await transaction.query(
                """
                SELECT payload_sha256, source, notification_uuid, type_and_subtype, reason, detail, first_seen_at, last_seen_at,
                       first_run_id, last_run_id, times_seen, acknowledged_at, acknowledged_note
                FROM quarantined_payloads
                WHERE environment = \(environment) AND bundle_id = \(bundleId) AND (\(all) OR acknowledged_at IS NULL)
                ORDER BY first_seen_at, payload_sha256
                """, logger: logger)
            var result: [QuarantinedPayload] = []
            for try await row in rows {
                let columns = NamedColumns(row)
                result.append(
                    QuarantinedPayload(
                        payloadSHA256: try columns["payload_sha256"], source: try columns.stored("source", of: "quarantined_payloads"),
                        notificationUUID: try columns["notification_uuid"], typeAndSubtype: try columns["type_and_subtype"],
                        reason: try columns.stored("reason", of: "quarantined_payloads"), detail: try columns["detail"],
                        firstSeenAt: try columns["first_seen_at"], lastSeenAt: try columns["last_seen_at"], firstRunId: try columns["first_run_id"],
                        lastRunId: try columns["last_run_id"], timesSeen: try columns["times_seen"], acknowledgedAt: try columns["acknowledged_at"],
                        acknowledgedNote: try columns["acknowledged_note"]))
            }
            return result
        }
    }

    /// The signed value of a quarantined payload, for `reconciler inspect`.
    package func quarantinedSignedPayload(sha256: String) async throws -> String? {
        try await read { [logger] transaction in
            let rows = try await transaction.query(
                "SELECT signed_payload FROM quarantined_payloads WHERE payload_sha256 = \(sha256)", logger: logger)
            for try await payload in rows.decode(String.self) { return payload }
            return nil
        }
    }

    /// What `acknowledge` matched.
    package enum AcknowledgeResult: Sendable, Equatable {
        case acknowledged(sha256: String)
        case notFound
        /// The selector matches several payloads; give more of the hash.
        case ambiguous(count: Int)
    }

    /// Acknowledges one quarantined payload, named by its notificationUUID or a prefix (at least 8
    /// characters) of its SHA-256: it stays quarantined and is still reported by runs that meet
    /// it, but no longer counts as unacknowledged for alerts.
    package func acknowledge(_ selector: String, note: String?, app: AppTarget) async throws -> AcknowledgeResult {
        try await read { [logger] transaction in
            let matches = try await Self.quarantinedPayloads(
                matching: selector, app: app, on: transaction, logger: logger)
            guard matches.count == 1, let hash = matches.first else {
                return matches.isEmpty ? .notFound : .ambiguous(count: matches.count)
            }
            try await transaction.query(
                """
                UPDATE quarantined_payloads SET acknowledged_at = COALESCE(acknowledged_at, now()), acknowledged_note = \(note)
                WHERE payload_sha256 = \(hash)
                """, logger: logger)
            return .acknowledged(sha256: hash)
        }
    }

    /// The SHA-256 of each quarantined payload of an app and environment that `selector` names as
    /// ``acknowledge(_:note:app:)`` reads it, acknowledging none.
    package func quarantinedPayloads(matching selector: String, app: AppTarget) async throws -> [String] {
        try await read { [logger] transaction in
            try await Self.quarantinedPayloads(matching: selector, app: app, on: transaction, logger: logger)
        }
    }

    /// A notificationUUID, or a prefix of at least 8 characters of a payload's SHA-256.
    private static func quarantinedPayloads(
        matching selector: String, app: AppTarget, on transaction: DatabaseTransaction, logger: Logger
    ) async throws -> [String] {
        let prefix = selector.lowercased()
        let rows = try await transaction.query(
            """
            SELECT payload_sha256 FROM quarantined_payloads
            WHERE environment = \(app.environment) AND bundle_id = \(app.bundleId)
              AND (notification_uuid = \(selector) OR (length(\(prefix)) >= 8 AND starts_with(payload_sha256, \(prefix))))
            """, logger: logger)
        var matches: [String] = []
        for try await hash in rows.decode(String.self) { matches.append(hash) }
        return matches
    }

    /// How many quarantined payloads of an app and environment nobody acknowledged yet.
    package func unacknowledgedQuarantineCount(app: AppTarget) async throws -> Int {
        try await read { [logger] transaction in
            let rows = try await transaction.query(
                """
                SELECT count(*) FROM quarantined_payloads
                WHERE environment = \(app.environment) AND bundle_id = \(app.bundleId) AND acknowledged_at IS NULL
                """, logger: logger)
            for try await count in rows.decode(Int.self) { return count }
            return 0
        }
    }
}

// MARK: The live path's quarantine

extension RunLedger {
    /// Quarantines an authentic notification the webhook could not decode, in a transaction of its
    /// own, under the app and environment it names (`nil` when they cannot be read, stored as ''):
    /// its exact bytes, once by their SHA-256; posted again, it is counted again. Returns whether it
    /// was new.
    package func quarantineLive(_ rejection: Rejection, bundleId: String?, environment: AppStoreEnvironment?) async throws -> Bool {
        let (bundleId, environment) = (bundleId ?? "", environment?.rawValue ?? "")
        return try await read { [logger] transaction in
            let rows = try await transaction.query(
                """
                INSERT INTO quarantined_payloads AS q (payload_sha256, environment, bundle_id, source, notification_uuid, type_and_subtype,
                    reason, detail, signed_payload)
                VALUES (\(rejection.payloadSHA256), \(environment), \(bundleId), \(Rejection.Source.webhook.rawValue),
                    \(rejection.notificationUUID), \(rejection.typeAndSubtype), \(rejection.reason.rawValue), \(rejection.detail),
                    \(rejection.signedPayload))
                ON CONFLICT (payload_sha256) DO UPDATE SET last_seen_at = now(), times_seen = q.times_seen + 1
                RETURNING (xmax = 0)
                """, logger: logger)
            for try await inserted in rows.decode(Bool.self) { return inserted }
            return false
        }
    }

    /// A notification the webhook quarantined, as `rejections --retry` handles it again.
    package struct QuarantinedNotification: Sendable, Hashable {
        package var payloadSHA256: String
        /// The app and environment it was filed under (`nil` when they could not be read).
        package var bundleId: String?
        package var environment: AppStoreEnvironment?
        package var notificationUUID: String?
        package var signedPayload: String
    }

    /// The notifications the webhook quarantined that `selector` names, in any app: by the
    /// notificationUUID they claim or at least 8 characters of their SHA-256 (as `--ack` reads it).
    package func quarantinedNotifications(matching selector: String) async throws -> [QuarantinedNotification] {
        try await read { [logger] transaction in
            let prefix = selector.lowercased()
            let rows = try await transaction.query(
                """
                SELECT payload_sha256, bundle_id, environment, notification_uuid, signed_payload FROM quarantined_payloads
                WHERE source = \(Rejection.Source.webhook.rawValue)
                  AND (notification_uuid = \(selector) OR (length(\(prefix)) >= 8 AND starts_with(payload_sha256, \(prefix))))
                ORDER BY payload_sha256
                """, logger: logger)
            var result: [QuarantinedNotification] = []
            for try await row in rows.decode((String, String, String, String?, String).self) {
                result.append(
                    QuarantinedNotification(
                        payloadSHA256: row.0, bundleId: row.1.isEmpty ? nil : row.1,
                        environment: row.2.isEmpty ? nil : AppStoreEnvironment(rawValue: row.2), notificationUUID: row.3,
                        signedPayload: row.4))
            }
            return result
        }
    }

    /// Takes a quarantined notification out of the quarantine, in the transaction that applied it.
    package func removeFromQuarantine(sha256: String, on transaction: DatabaseTransaction) async throws {
        try await transaction.query("DELETE FROM quarantined_payloads WHERE payload_sha256 = \(sha256)", logger: logger)
    }

    /// Notes why a quarantined notification still fails, after a retry that could not apply it.
    package func noteRetryFailed(sha256: String, reason: VerificationError.Reason, detail: String) async throws {
        try await read { [logger] transaction in
            try await transaction.query(
                """
                UPDATE quarantined_payloads SET reason = \(reason.rawValue), detail = \(detail), last_seen_at = now()
                WHERE payload_sha256 = \(sha256)
                """, logger: logger)
        }
    }
}

extension Rejection {
    /// As reported: without the signed payload, which only the quarantine keeps.
    fileprivate var withoutPayload: Rejection {
        var reported = self
        reported.signedPayload = ""
        return reported
    }
}
