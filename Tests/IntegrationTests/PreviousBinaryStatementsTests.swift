import AppStoreServer
import Foundation
import PostgresNIO
import ReconcilerDomain
import TestSupport
import Testing

@testable import ReconcilerStore

/// An upgrade keeps the webhook of the binary still serving: after every migration of this
/// version (0022's queue of redeliveries among them), the statement that records notifications and
/// queues their first deliveries in the binary before it (main at 0d02181; its text copied below,
/// as that binary prepares it) still runs: its `ON CONFLICT (notification_uuid, target_id)` names
/// forward_queue's key, which 0022 keeps.
@Suite(.serialized, .timeLimit(.minutes(5))) struct PreviousBinaryStatementsTests {
    /// `InsertNotificationsSQL` of main at 0d02181, as prepared: headers, rows, hold, target, only
    /// (twice), target, its redacted form, run, bundle, environment, hold.
    static let previousInsert = """
        WITH headers AS (
            INSERT INTO jws_headers (sha256, encoded_header)
            SELECT sha256, encoded_header FROM jsonb_populate_recordset(NULL::jws_headers, $1::jsonb)
            WHERE encoded_header IS NOT NULL ORDER BY sha256
            ON CONFLICT (sha256) DO NOTHING
        ), missing_headers AS (
            SELECT encode(h.sha256, 'hex') AS sha256 FROM jsonb_populate_recordset(NULL::jws_headers, $1::jsonb) h
        WHERE h.encoded_header IS NULL AND NOT EXISTS (SELECT 1 FROM jws_headers s WHERE s.sha256 = h.sha256)
        ), inserted AS (
            INSERT INTO notifications (notification_uuid, notification_type, subtype, signed_date_ms, bundle_id, environment, original_transaction_id, transaction_id,
        source, run_id, outcome, first_send_attempt_ms, respond_by_ms, consumption_request_reason, payload_form, payload_sha256, signed_payload, header_sha256, payload, signature,
        transaction_offset, transaction_signature, transaction_header_sha256, renewal_offset, renewal_signature, renewal_header_sha256)
            SELECT notification_uuid, notification_type, subtype, signed_date_ms, bundle_id, environment, original_transaction_id, transaction_id,
        source, run_id, outcome, first_send_attempt_ms, respond_by_ms, consumption_request_reason, payload_form, payload_sha256, signed_payload, header_sha256, payload, signature,
        transaction_offset, transaction_signature, transaction_header_sha256, renewal_offset, renewal_signature, renewal_header_sha256 FROM jsonb_populate_recordset(NULL::notifications, $2::jsonb)
            ON CONFLICT (notification_uuid) DO NOTHING
            RETURNING notification_uuid, respond_by_ms
        ), deliveries AS (
            SELECT notification_uuid, respond_by_ms,
                   $3::bigint IS NOT NULL
                       AND NOT coalesce(respond_by_ms > (extract(epoch FROM now()) * 1000)::bigint, false) AS held
            FROM inserted
            WHERE $4::text IS NOT NULL AND ($5::text[] IS NULL OR notification_uuid = ANY($6::text[]))
        ), queued AS (
            INSERT INTO forward_queue (notification_uuid, target_id, target_redacted, run_id, bundle_id, environment, respond_by_ms, held,
                next_attempt_at)
            SELECT notification_uuid, $7, $8, $9, $10, $11,
                respond_by_ms, held, CASE WHEN held THEN now() + $12 * interval '1 millisecond' ELSE now() END
            FROM deliveries
            ORDER BY notification_uuid
            ON CONFLICT (notification_uuid, target_id) DO NOTHING
        )
        SELECT notification_uuid, NULL::text FROM inserted
        UNION ALL SELECT NULL, sha256 FROM missing_headers
        """

    @Test func thePreviousBinarysQueueInsertStillRunsAfterMigrating() async throws {
        let app = try TestApp()
        try await TestDatabase.with { db in
            // A notification recorded by this version, as a row the previous binary would send (another UUID).
            let recorded = try await app.recordForwarded(1, to: "https://app.internal/apple", in: db, purchasePrefix: "previous")
            let uuid = UUID().uuidString.lowercased()
            let rows = try #require(
                try await db.strings(
                    """
                    SELECT jsonb_build_array(to_jsonb(n) || jsonb_build_object('notification_uuid', \(uuid)::text))::text
                    FROM notifications n WHERE notification_uuid = \(recorded[0])
                    """
                ).first)
            let target = ForwardingTarget(url: "https://previous.internal/apple")
            for _ in 0..<2 {
                var bindings = PostgresBindings()
                bindings.append("[]")
                bindings.append(rows)
                bindings.append(Int64?.none)
                bindings.append(target.id)
                bindings.append([String]?.none)
                bindings.append([String]?.none)
                bindings.append(target.id)
                bindings.append(target.redacted)
                bindings.append(Int64?.none)
                bindings.append(TestApp.bundleId)
                bindings.append(app.environment.rawValue)
                bindings.append(Int64?.none)
                // The second time the notification is a duplicate: nothing is queued again, and nothing fails.
                try await db.execute(PostgresQuery(unsafeSQL: Self.previousInsert, binds: bindings))
            }
            #expect(try await db.count("SELECT count(*) FROM notifications WHERE notification_uuid = \(uuid)") == 1)
            #expect(
                try await db.count(
                    "SELECT count(*) FROM forward_queue WHERE notification_uuid = \(uuid) AND target_id = \(target.id) AND status = 'pending'") == 1)
        }
    }
}
