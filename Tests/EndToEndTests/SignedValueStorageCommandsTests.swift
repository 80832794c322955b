import AppStoreServer
import Crypto
import Foundation
import MockAppStore
import PostgresNIO
import TestSupport
import Testing

/// Stored signed values end to end: real processes (`mock-appstore` signing with certificates as
/// large as Apple's, `reconciler serve` forwarding, `repair`, `run`), a real PostgreSQL, and the
/// app's endpoint imitated by ``AppWebhookReceiver``. Every notification stored live, replayed,
/// repaired, and every one forwarded, is byte for byte what the mock signed; `verify-stored`,
/// `inspect --notification` and `compact-payloads` work on the stored rows; a changed row is found.
@Suite(.serialized) struct SignedValueStorageCommandsTests {
    static func sha256(_ text: String) -> String {
        SHA256.hash(data: Data(text.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    @Test func everyNotificationStoredOrForwardedIsWhatTheAppStoreSigned() async throws {
        try await AppWebhookReceiver.withRunning(.init()) { receiver, receiverURL in
            let forwarding = ["--forward-to", receiverURL, "--forward-unsigned", "--forward-backoff", "100ms"]
            try await Rehearsal.with(
                customers: 40, seed: 64, mockArguments: ["--apple-sized-certificates"], serveArguments: forwarding
            ) { rehearsal in
                let lines = try await rehearsal.mockNotifications().filter { !$0.forged }
                let signed = Dictionary(
                    uniqueKeysWithValues: lines.compactMap { line in line.signedPayloadSHA256.map { (line.notificationUUID, $0) } })
                #expect(signed.count == lines.count)

                // Repaired: customers repaired before the run record their outage notifications first.
                let outageStart = try #require(ISO8601DateFormatter().date(from: rehearsal.outageStart)).timeIntervalSince1970 * 1000
                let outageEnd = try #require(ISO8601DateFormatter().date(from: rehearsal.outageEnd)).timeIntervalSince1970 * 1000
                let repaired = Set(
                    lines.filter { !$0.delivered && Double($0.firstAttemptDate) >= outageStart && Double($0.firstAttemptDate) < outageEnd }
                        .compactMap(\.originalTransactionId)
                ).sorted().prefix(3)
                #expect(!repaired.isEmpty)
                for original in repaired {
                    let repair = try await rehearsal.reconciler(["repair", "--transaction-id", original])
                    #expect(repair.status == 0, "\(repair.stderr)")
                }
                // Replayed and forwarded: the outage window.
                let run = try await rehearsal.runWindow(forwarding + ["--forward-drain-timeout", "120s"])
                #expect(run.status == 0, "\(run.stderr)")

                let rows = try await rehearsal.db.strings(
                    """
                    SELECT n.notification_uuid || ' ' || encode(n.payload_sha256, 'hex') || ' ' || n.payload_form || ' '
                        || CASE WHEN n.source = 'webhook' THEN 'live' WHEN r.kind = 'repair' THEN 'repaired' ELSE 'replayed' END
                    FROM notifications n LEFT JOIN reconcile_runs r ON r.run_id = n.run_id
                    """
                ).map { $0.split(separator: " ").map(String.init) }
                let kinds = Dictionary(grouping: rows, by: { $0[3] }).mapValues(\.count)
                #expect(kinds["live"] ?? 0 > 0 && kinds["replayed"] ?? 0 > 0 && kinds["repaired"] ?? 0 > 0, "\(kinds)")
                for row in rows {
                    #expect(row[1] == signed[row[0]], "\(row[3]) notification \(row[0]) is not stored as signed")
                    #expect(row[2] == "parts", "\(row)")
                }
                // Rebuilt from the database: the same bytes.
                let uuids = rows.map { $0[0] }.sorted()
                let rebuilt = try await rehearsal.db.signedPayloads("SELECT notification_uuid FROM notifications ORDER BY notification_uuid")
                #expect(rebuilt.map(Self.sha256) == uuids.map { signed[$0] })
                // One header (the mock's one signing certificate) for every value stored.
                #expect(try await rehearsal.db.count("SELECT count(*) FROM jws_headers") == 1)

                // Forwarded: Apple's exact body, {"signedPayload":"<the JWS the App Store signed>"}.
                let statistics = receiver.statistics
                #expect(statistics.acknowledged.count > 0 && statistics.notApplesBody == 0, "\(statistics.notApplesBody)")
                for (uuid, hash) in statistics.signedPayloadSHA256 {
                    #expect(hash == signed[uuid], "forwarded notification \(uuid) is not what was signed")
                }

                // verify-stored: every value verifies; inspect shows one stored value, byte for byte.
                let verified = try await rehearsal.reconciler(["verify-stored"])
                #expect(verified.status == 0, "\(verified.stdout)\n\(verified.stderr)")
                #expect(verified.stdout.contains("notifications: \(rows.count) verified"), "\(verified.stdout)")
                let one = try #require(uuids.first)
                let printed = try await rehearsal.reconciler(["inspect", "--notification", one, "--print-jws"])
                #expect(printed.status == 0 && Self.sha256(printed.stdout.trimmingCharacters(in: .newlines)) == signed[one], "\(printed.stderr)")
                let inspected = try await rehearsal.reconciler(["inspect", "--notification", one])
                #expect(inspected.status == 0 && inspected.stdout.contains("\"genuine\" : true"), "\(inspected.stdout)\(inspected.stderr)")
                // Nothing was written before migration 0015: nothing to compact.
                let compacted = try await rehearsal.reconciler(["compact-payloads"])
                #expect(compacted.status == 0 && compacted.stdout.hasPrefix("compacted 0 notifications"), "\(compacted.stdout)")

                // A stored payload changed in the database is found: exit 3, the row named.
                try await rehearsal.db.execute(
                    "UPDATE notifications SET signature = set_byte(signature, 3, get_byte(signature, 3) # 1) WHERE notification_uuid = \(one)")
                let altered = try await rehearsal.reconciler(["verify-stored"])
                #expect(altered.status == 3, "\(altered.stdout)\n\(altered.stderr)")
                #expect(altered.stdout.contains("NOT VERIFIED notification \(one)"), "\(altered.stdout)")
                #expect(altered.stdout.contains("notifications: \(rows.count - 1) verified"), "\(altered.stdout)")
            }
        }
    }

    /// `prune`'s new options: a payload age under Apple's retention and a margin is refused before
    /// anything is read; the dry run counts what the real prune removes; the run's report stays.
    @Test func pruneRefusesYoungPayloadsAndRemovesFinishedRunsRows() async throws {
        try await Rehearsal.with(customers: 20, seed: 65) { rehearsal in
            let run = try await rehearsal.runWindow()
            #expect(run.status == 0, "\(run.stderr)")
            for refused in [["--payloads-older-than", "180d"], ["--payloads-older-than", "30d"], ["--finished-runs-older-than", "30m"]] {
                let result = try await rehearsal.reconciler(["prune"] + refused)
                #expect(result.status == 1, "\(refused): \(result.stderr)")
            }
            let rows = """
                SELECT (SELECT count(*) FROM run_shards) + (SELECT count(*) FROM gap_queue) + (SELECT count(*) FROM run_api_seconds)
                     + (SELECT count(*) FROM run_api_budgets)
                """
            let before = try await rehearsal.db.count(PostgresQuery(unsafeSQL: rows))
            #expect(before > 0)
            try await rehearsal.db.execute("UPDATE reconcile_runs SET finished_at = now() - interval '40 days'")
            let arguments = [
                "prune", "--finished-runs-older-than", "30d", "--payloads-older-than", "210d", "--acknowledged-quarantine-older-than", "30d",
            ]
            let dry = try await rehearsal.reconciler(arguments + ["--dry-run"])
            #expect(dry.status == 0, "\(dry.stderr)")
            #expect(dry.stdout.contains("would prune \(before) rows of finished runs"), "\(dry.stdout)")
            #expect(dry.stdout.contains("would prune 0 signed payloads"), "\(dry.stdout)")
            #expect(try await rehearsal.db.count(PostgresQuery(unsafeSQL: rows)) == before)
            // Beside a new run of the window: the prune removes the old run's rows, the new run goes on.
            let again = try rehearsal.start(["run", "--start", rehearsal.outageStart, "--end", rehearsal.outageEnd, "--fresh"])
            let real = try await rehearsal.reconciler(arguments)
            #expect(real.status == 0 && real.stdout.contains("pruned \(before) rows of finished runs"), "\(real.stdout)\(real.stderr)")
            let second = try await again.wait()
            #expect(second.status == 0, "\(second.stderr)")
            let firstRun = try #require(try await rehearsal.db.strings("SELECT min(run_id)::text FROM reconcile_runs").first)
            #expect(
                try await rehearsal.db.count(
                    PostgresQuery(
                        unsafeSQL: rows.replacingOccurrences(of: "FROM run_shards", with: "FROM run_shards WHERE run_id = \(firstRun)")
                            .replacingOccurrences(of: "FROM gap_queue", with: "FROM gap_queue WHERE run_id = \(firstRun)")
                            .replacingOccurrences(of: "FROM run_api_seconds", with: "FROM run_api_seconds WHERE run_id = \(firstRun)")
                            .replacingOccurrences(of: "FROM run_api_budgets", with: "FROM run_api_budgets WHERE run_id = \(firstRun)"))) == 0)
            // The runs and their reports stay; `status` still shows them; the new run recovered the window.
            let status = try await rehearsal.reconciler(["status"])
            #expect(status.status == 0, "\(status.stderr)")
            #expect(try await rehearsal.db.count("SELECT count(*) FROM reconcile_runs WHERE report IS NOT NULL") == 2)
            #expect(try await rehearsal.export() == (try await rehearsal.truth()))
        }
    }
}
