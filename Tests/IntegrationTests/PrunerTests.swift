import AppStoreServer
import Foundation
import MockAppStore
import PostgresNIO
import ReconcilerDomain
import ReconcilerShared
import TestSupport
import Testing

@testable import Reconciler
@testable import ReconcilerStore

/// `Pruner`'s parts for raw payloads (never one with a delivery not yet delivered or an
/// unacknowledged quarantine, never a young one; the payload's hash stays, also for a row stored
/// whole before payloads were taken apart), finished runs' shards, queue and timeline rows (never an
/// unfinished run's) and acknowledged quarantine. Each part's count (the dry run) is exactly what it
/// then removes, in batches smaller than the work.
@Suite struct PrunerTests {
    let app: TestApp
    init() throws { app = try TestApp() }

    static let day: Int64 = 86_400_000
    var now: Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    /// A live notification of purchase `original` signed `age` ago, forwarded to the test hook; its UUID.
    func record(_ original: String, signedAgo age: Int64, in db: TestDatabase) async throws -> String {
        let signed = now - age
        let uuid = UUID().uuidString.lowercased()
        let payload = try app.notification(
            .didRenew, uuid: uuid, signedDate: signed, transaction: app.subscription(original: original, period: 1, signedDate: signed),
            renewal: app.renewal(original: original, autoRenew: .on, signedDate: signed), status: .active)
        _ = try await app.handler(db).handle(
            signedPayload: payload, source: .webhook, forwarding: .init(target: ForwardingTarget(url: "https://app.example.com/hook")))
        return uuid
    }

    func createRun(_ db: TestDatabase, status: String, finishedDaysAgo days: Int?) async throws -> Int64 {
        let ids = try await db.strings(
            """
            INSERT INTO reconcile_runs (kind, environment, bundle_id, window_start_ms, window_end_ms, status, phase, finished_at, report)
            VALUES ('manual', 'Production', \(TestApp.bundleId), 0, 1, \(status), 'done', now() - \(days ?? 0) * interval '1 day',
                    '{"kept": true}'::jsonb)
            RETURNING run_id::text
            """)
        let runId = Int64(ids[0])!
        for index in 0..<3 {
            try await db.execute(
                "INSERT INTO run_shards (run_id, query_index, shard_start_ms, shard_end_ms) VALUES (\(runId), \(index), 0, 1)")
            try await db.execute("INSERT INTO gap_queue (run_id, anchor_transaction_id, reason) VALUES (\(runId), \("a\(index)"), 'touched')")
            try await db.execute(
                "INSERT INTO run_api_seconds (run_id, worker, endpoint, second, requests) VALUES (\(runId), 'w', 'Get Notification History', \(index), 5)"
            )
        }
        try await db.execute(
            "INSERT INTO run_api_budgets (run_id, worker, endpoint, requests_per_second) VALUES (\(runId), 'w', 'Get Notification History', 40)")
        return runId
    }

    @Test func eachPartRemovesExactlyWhatItsDryRunCounts() async throws {
        try await TestDatabase.with { db in
            let old = 300 * Self.day
            // A delivered, B pending, C failed, D named by an unacknowledged quarantine, E by an acknowledged one: all old; F young.
            var uuids: [String: String] = [:]
            for (name, age) in [("A", old), ("B", old), ("C", old), ("D", old), ("E", old), ("G", old), ("F", Self.day)] {
                uuids[name] = try await record("22\(name)", signedAgo: age, in: db)
            }
            try await db.execute("UPDATE notifications SET received_at = now() - interval '300 days' WHERE original_transaction_id <> '22F'")
            try await db.execute(
                """
                UPDATE forward_queue SET status = 'delivered', delivered_at = now() - interval '299 days', attempts = 1
                WHERE notification_uuid = ANY(\([uuids["A"]!, uuids["D"]!, uuids["E"]!, uuids["G"]!, uuids["F"]!]))
                """)
            try await db.execute("UPDATE forward_queue SET status = 'failed', attempts = 12 WHERE notification_uuid = \(uuids["C"]!)")
            // Snapshots: S old, T young.
            for (original, age) in [("22S", old), ("22T", Self.day)] {
                let signed = try app.authority.signer.sign(app.subscription(original: original, period: 0, signedDate: now - age))
                let verified = try await SignedDataVerifier(configuration: app.verifierConfiguration).verifyTransaction(signed)
                try await db.database.storeHeaders(of: [try #require(JWSParts(exactly: signed))])
                let store = PurchaseStore(database: db.database, scope: AppScope(target: app.verifierConfiguration.target, entitlement: .init()))
                try await db.database.transaction { try await store.upsertTransactions([.init(verified)], on: $0) }
            }
            try await db.execute("UPDATE transactions SET updated_at = now() - interval '300 days' WHERE original_transaction_id = '22S'")
            // Quarantine: Q1 acknowledged long ago (names E), Q2 not acknowledged (names D), Q3 acknowledged yesterday.
            for (hash, uuid, acknowledged) in [
                ("q1", uuids["E"], "now() - interval '100 days'"), ("q2", uuids["D"], "NULL"), ("q3", nil, "now() - interval '1 day'"),
            ] {
                try await db.execute(
                    PostgresQuery(
                        unsafeSQL: """
                            INSERT INTO quarantined_payloads (payload_sha256, environment, bundle_id, source, notification_uuid, reason, detail,
                                signed_payload, acknowledged_at)
                            VALUES ($1, 'Production', $2, 'notification_history', $3, 'INVALID_SIGNATURE', 'test', 'x.y.z', \(acknowledged))
                            """,
                        binds: try {
                            var b = PostgresBindings()
                            b.append(hash)
                            b.append(TestApp.bundleId)
                            b.append(uuid)
                            return b
                        }()))
            }
            let finished = try await createRun(db, status: "succeeded", finishedDaysAgo: 40)
            let lost = try await createRun(db, status: "lost", finishedDaysAgo: 40)
            let partial = try await createRun(db, status: "partial", finishedDaysAgo: 40)
            let recent = try await createRun(db, status: "succeeded", finishedDaysAgo: 1)

            let pruner = Pruner(database: db.database, batchSize: 2)
            let cutoffs: [(PrunePart, Date)] = [
                (.payloads, Date(timeIntervalSinceNow: -Double(PrunePart.payloadMinimumAge.milliseconds) / 1000)),
                (.finishedRuns, Date(timeIntervalSinceNow: -30 * 86_400)), (.acknowledgedQuarantine, Date(timeIntervalSinceNow: -30 * 86_400)),
            ]
            let before = try await db.stateFingerprint()
            var counted: [PrunePart: Int] = [:]
            for (part, cutoff) in cutoffs { counted[part] = try await pruner.count(part, before: cutoff) }
            #expect(try await db.stateFingerprint() == before, "counting changes nothing")
            var pruned: [PrunePart: Int] = [:]
            for (part, cutoff) in cutoffs { pruned[part] = try await pruner.prune(part, before: cutoff) }
            #expect(pruned == counted)
            // Notifications A, E, G and snapshot S; B (pending), C (failed), D (quarantined), F and T (young) keep theirs.
            #expect(counted[.payloads] == 4, "\(counted)")
            let prunedUUIDs = Set(try await db.strings("SELECT notification_uuid FROM notifications WHERE payload_form = 'pruned'"))
            #expect(prunedUUIDs == [uuids["A"]!, uuids["E"]!, uuids["G"]!])
            #expect(
                try await db.count(
                    """
                    SELECT count(*) FROM notifications WHERE payload_form = 'pruned' AND payload_sha256 IS NOT NULL AND header_sha256 IS NOT NULL
                      AND payload IS NULL AND signature IS NULL AND transaction_signature IS NULL AND outcome = 'applied'
                    """) == 3, "the hashes and the outcome stay")
            #expect(try await db.strings("SELECT original_transaction_id FROM transactions WHERE payload_form = 'pruned'") == ["22S"])
            #expect(counted[.finishedRuns] == 20, "\(counted)")
            for (run, rows) in [(finished, 0), (lost, 0), (partial, 10), (recent, 10)] {
                #expect(
                    try await db.count(
                        """
                        SELECT (SELECT count(*) FROM run_shards WHERE run_id = \(run)) + (SELECT count(*) FROM gap_queue WHERE run_id = \(run))
                             + (SELECT count(*) FROM run_api_seconds WHERE run_id = \(run)) + (SELECT count(*) FROM run_api_budgets WHERE run_id = \(run))
                        """) == rows, "run \(run)")
            }
            #expect(try await db.count("SELECT count(*) FROM reconcile_runs WHERE report IS NOT NULL") == 4, "runs and their reports stay")
            #expect(try await db.strings("SELECT payload_sha256 FROM quarantined_payloads ORDER BY 1") == ["q2", "q3"])
            #expect(counted[.acknowledgedQuarantine] == 1)

            // What is left verifies; what was pruned is counted apart (with the transactions inside those notifications).
            let report = try await StoredPayloadVerifier(
                database: db.database, verifiers: [try SignedDataVerifier(configuration: app.verifierConfiguration)]
            ).verify(since: nil)
            #expect(report.failures.isEmpty, "\(report.failures)")
            #expect(report.notifications.pruned == 3 && report.notifications.verified == 4, "\(report)")
            #expect(report.transactions.pruned == 4 && report.transactions.verified == 5, "\(report)")
            // A second prune finds nothing.
            for (part, cutoff) in cutoffs { #expect(try await pruner.prune(part, before: cutoff) == 0) }
        }
    }

    /// Rows stored whole before signed values were taken apart (`legacy`: no hash stored yet), which
    /// `compact-payloads` has not converted, keep the SHA-256 of their JWS and of its header when
    /// their payload is pruned, as converted rows do; one that an unacknowledged quarantine names by
    /// that hash keeps its payload.
    @Test func aPayloadNotCompactedYetKeepsItsHashWhenPruned() async throws {
        try await TestDatabase.with { db in
            let signed = now - 300 * Self.day
            var notifications: [String: String] = [:]
            for original in ["5L1", "5L2"] {
                let uuid = "legacy-\(original)"
                let payload = try app.notification(
                    .didRenew, uuid: uuid, signedDate: signed, transaction: app.subscription(original: original, period: 1, signedDate: signed),
                    status: .active)
                notifications[uuid] = payload
                // As written before migration 0015: no form named (legacy), the whole JWS, no hash.
                try await db.execute(
                    """
                    INSERT INTO notifications (notification_uuid, notification_type, subtype, signed_date_ms, bundle_id, environment,
                        original_transaction_id, transaction_id, signed_payload, source, outcome, received_at)
                    VALUES (\(uuid), 'DID_RENEW', NULL, \(signed), \(TestApp.bundleId), 'Production', \(original), \(original + "-1"),
                        \(payload), 'webhook', 'applied', now() - interval '300 days')
                    """)
            }
            let transaction = try app.authority.signer.sign(app.subscription(original: "5L3", period: 0, signedDate: signed))
            try await db.execute(
                """
                INSERT INTO transactions (transaction_id, original_transaction_id, environment, bundle_id, signed_date_ms,
                    signed_transaction_info, from_notification, updated_at)
                VALUES ('5L3', '5L3', 'Production', \(TestApp.bundleId), \(signed), \(transaction), false, now() - interval '300 days')
                """)
            func hash(_ jws: String) -> String { Bytea.plainHex(JWSParts.sha256(jws)) }
            // The quarantine names the second notification by its payload's hash only.
            try await db.execute(
                """
                INSERT INTO quarantined_payloads (payload_sha256, environment, bundle_id, source, reason, detail, signed_payload)
                VALUES (\(hash(notifications["legacy-5L2"]!)), 'Production', \(TestApp.bundleId), 'notification_history',
                    'INVALID_SIGNATURE', 'test', 'x.y.z')
                """)
            #expect(try await db.count("SELECT count(*) FROM notifications WHERE payload_form = 'legacy' AND payload_sha256 IS NULL") == 2)

            let pruner = Pruner(database: db.database, batchSize: 2)
            let cutoff = Date(timeIntervalSinceNow: -Double(PrunePart.payloadMinimumAge.milliseconds) / 1000)
            let counted = try await pruner.count(.payloads, before: cutoff)
            #expect(try await pruner.prune(.payloads, before: cutoff) == counted)
            #expect(counted == 2, "the first notification and the transaction")
            // The payload's hash, and its header's (the first segment's, as `jws_headers` keys it).
            func kept(_ jws: String) -> String { "pruned \(hash(jws)) \(hash(String(jws.prefix { $0 != "." })))" }
            let forms = "payload_form || ' ' || coalesce(encode(payload_sha256, 'hex'), '-') || ' ' || coalesce(encode(header_sha256, 'hex'), '-')"
            #expect(
                try await db.strings("SELECT \(unescaped: forms) FROM notifications WHERE notification_uuid = 'legacy-5L1'")
                    == [kept(notifications["legacy-5L1"]!)])
            #expect(try await db.strings("SELECT \(unescaped: forms) FROM transactions WHERE transaction_id = '5L3'") == [kept(transaction)])
            #expect(try await db.signedPayloads("SELECT 'legacy-5L2'") == [notifications["legacy-5L2"]!], "the quarantined one keeps its payload")
        }
    }
}
