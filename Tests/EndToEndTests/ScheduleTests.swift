import AppStoreServer
import Foundation
import MockAppStore
import NIOHTTP1
import PostgresNIO
import ReconcilerDomain
import TestSupport
import Testing

@testable import Reconciler

/// Scheduled runs: the hundredth scheduled run is as correct, as cheap and as harmless as the first.
/// Real processes, a real PostgreSQL, the mock App Store over HTTP.
@Suite(.serialized) struct ScheduleTests {
    /// An interrupted scheduled run is finished first, in its own window; the next window
    /// starts where it ended.
    @Test func sinceLastFinishesTheNewestUnfinishedScheduledWindowFirst() async throws {
        try await Rehearsal.with(customers: 60, seed: 51, mockArguments: ["--latency-ms", "60"]) { rehearsal in
            // The first scheduled window reaches back over the outage (the newest live notification is after it).
            let killed = try rehearsal.start(["run", "--since-last", "--overlap", "8h", "--concurrency", "1", "--gap-concurrency", "1"])
            try await eventually("a committed page") {
                try await rehearsal.db.count("SELECT COALESCE(sum(pages_done), 0)::bigint FROM run_shards") > 2
            }
            killed.signal(SIGKILL)
            _ = try await killed.wait()
            let windowStart = try await rehearsal.db.count("SELECT window_start_ms FROM reconcile_runs WHERE run_id = 1")
            let windowEnd = try await rehearsal.db.count("SELECT window_end_ms FROM reconcile_runs WHERE run_id = 1")

            let next = try await rehearsal.reconciler(["run", "--since-last", "--overlap", "8h"])
            #expect(next.status == 0, "\(next.stdout)\n\(next.stderr)")
            // Run 1 was resumed in its own window and finished; run 2 starts where it ended, minus the overlap.
            #expect(try await rehearsal.db.count("SELECT count(*) FROM reconcile_runs") == 2)
            #expect(try await rehearsal.db.count("SELECT count(*) FROM reconcile_runs WHERE run_id = 1 AND status = 'succeeded'") == 1)
            #expect(try await rehearsal.db.count("SELECT window_start_ms FROM reconcile_runs WHERE run_id = 1") == windowStart)
            #expect(try await rehearsal.db.count("SELECT window_end_ms FROM reconcile_runs WHERE run_id = 1") == windowEnd)
            #expect(try await rehearsal.db.count("SELECT window_start_ms FROM reconcile_runs WHERE run_id = 2") == windowEnd - 8 * 3_600_000)
            #expect(try await rehearsal.db.count("SELECT count(*) FROM reconcile_runs WHERE kind = 'scheduled'") == 2)
            let export = try await rehearsal.export(), truth = try await rehearsal.truth()
            #expect(export == truth, "\(Rehearsal.difference(export, truth))")
        }
    }

    /// A window that stays unfinished (every customer's transaction history keeps
    /// failing with 5000001) never freezes the schedule: each `--since-last` retries it and then
    /// recovers the newest window, where a new outage's refund is; after `--give-up-after` failures
    /// in a row its customers are given up, listed where an operator looks, and the window finishes.
    @Test func aWindowThatStaysUnfinishedNeverFreezesTheSchedule() async throws {
        try await Rehearsal.with(customers: 24, seed: 81) { rehearsal in
            let orders = try await RepairTests.orders(rehearsal)
            try await rehearsal.setFaults(["failingCustomers": Array(Set(orders.map(\.originalTransactionId))).sorted()])
            let schedule = ["run", "--since-last", "--overlap", "8h", "--give-up-after", "3"]
            let first = try await rehearsal.reconciler(schedule)
            #expect(first.status == 2, "\(first.stdout)\n\(first.stderr)")
            #expect(try await rehearsal.db.count("SELECT count(*) FROM reconcile_runs WHERE run_id = 1 AND status = 'partial'") == 1)

            // A new outage: the webhook is down when Apple refunds a purchase.
            rehearsal.serve.signal(SIGKILL)
            _ = try await rehearsal.serve.wait()
            let truth = try await rehearsal.truth().split(separator: "\n").compactMap {
                try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }
            let refundable = try #require(
                truth.first { $0["revocationDate"] is NSNull && ($0["productId"] as? String)?.contains("monthly") == true })
            let refundedOriginal = try #require(refundable["originalTransactionId"] as? String)
            let transactionId = try #require(refundable["latestTransactionId"] as? String)
            let refund = try await HTTP.request(.POST, "\(rehearsal.mockURL)/mock/refund?transactionId=\(transactionId)").json
            let refundUUID = try #require(refund["notificationUUID"] as? String)
            try await eventually("the refund's delivery failed, and its first attempt is in the past") {
                let lines = String(decoding: try await HTTP.request(.GET, "\(rehearsal.mockURL)/mock/notifications").body, as: UTF8.self)
                guard let line = lines.split(separator: "\n").first(where: { $0.contains(refundUUID) }),
                    let item = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                    let firstAttempt = item["firstAttemptDate"] as? Int64
                else { return false }
                return item["delivered"] as? Bool == false && firstAttempt < Int64(Date().timeIntervalSince1970 * 1000)
            }

            // The unfinished window is retried (and stays partial), and the newest window recovers the new outage anyway.
            let second = try await rehearsal.reconciler(schedule)
            #expect(second.status == 2, "\(second.stdout)\n\(second.stderr)")
            #expect(try await rehearsal.db.count("SELECT count(*) FROM reconcile_runs WHERE run_id = 1 AND status = 'partial'") == 1)
            let firstEnd = try await rehearsal.db.count("SELECT window_end_ms FROM reconcile_runs WHERE run_id = 1")
            #expect(try await rehearsal.db.count("SELECT window_start_ms FROM reconcile_runs WHERE run_id = 2") == firstEnd - 8 * 3_600_000)
            #expect(try await rehearsal.db.count("SELECT count(*) FROM notifications WHERE notification_uuid = \(refundUUID)") == 1)
            let exported = try await rehearsal.reconciler(["export"]).stdout.split(separator: "\n").first { $0.contains(refundedOriginal) }
            #expect(exported?.contains("\"revocationDate\":null") == false, "\(exported ?? "")")
            let report = rehearsal.file("schedule.json")
            defer { try? FileManager.default.removeItem(atPath: report) }

            // The third failure in a row gives the first window's customers up: it finishes, loudly.
            let third = try await rehearsal.reconciler(schedule + ["--report-json", report])
            #expect(third.status == 2, "\(third.stdout)\n\(third.stderr)")
            #expect(
                try await rehearsal.db.count("SELECT count(*) FROM reconcile_runs WHERE run_id = 1 AND status = 'succeeded_with_rejections'") == 1)
            #expect(try await rehearsal.db.count("SELECT count(*) FROM given_up WHERE run_id = 1 AND kind = 'customer'") > 0)
            #expect(third.stdout.contains("GIVEN UP customer"), "\(third.stdout)")
            let unfinished = try Rehearsal.report(report)["unfinishedScheduledWindows"] as? [[String: Any]] ?? []
            #expect(unfinished.compactMap { $0["runId"] as? Int }.contains(2), "\(unfinished)")

            // Where an operator looks: the quarantine's list, and status --json.
            let rejections = try await rehearsal.reconciler(["rejections", "--json"])
            let entries = try JSONSerialization.jsonObject(with: Data(rejections.stdout.utf8)) as? [[String: Any]] ?? []
            #expect(entries.contains { $0["kind"] as? String == "customer" && ($0["reason"] as? String)?.contains("5000001") == true })
            let status = try await rehearsal.reconciler(["status", "--json"])
            let rows = try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [[String: Any]] ?? []
            let runOne = rows.first { ($0["run"] as? [String: Any])?["runId"] as? Int == 1 }
            #expect((runOne?["givenUp"] as? [Any])?.isEmpty == false, "\(status.stdout)")

            // The next invocation gives up the second window's customers in turn, and it finishes too.
            let fourth = try await rehearsal.reconciler(schedule)
            #expect([2, 4].contains(fourth.status), "\(fourth.stdout)\n\(fourth.stderr)")
            #expect(
                try await rehearsal.db.count("SELECT count(*) FROM reconcile_runs WHERE run_id = 2 AND status = 'succeeded_with_rejections'") == 1)
        }
    }

    /// `--detected` recovers every window it finds, reporting each, even when an earlier one
    /// quarantined payloads (the first version stopped at the first window that did not succeed).
    @Test func runDetectedRecoversEveryWindowItFinds() async throws {
        try await Rehearsal.with(customers: 50, seed: 73, mockArguments: ["--forged", "2", "--outage", "now-2h/now-30m"]) { rehearsal in
            let detect = try await rehearsal.reconciler(["detect-outage", "--since", "1d", "--json"])
            let windows = (try JSONSerialization.jsonObject(with: Data(detect.stdout.utf8)) as? [String: Any])?["windows"] as? [Any]
            let found = windows?.count ?? 0
            #expect(found >= 2, "\(detect.stdout)")
            let recovered = try await rehearsal.reconciler(["run", "--detected", "--detect-since", "1d"])
            #expect(recovered.status == 4, "\(recovered.stdout)\n\(recovered.stderr)")
            #expect(recovered.stdout.components(separatedBy: "reconcile run ").count - 1 == found)
            #expect(try await rehearsal.db.count("SELECT count(*) FROM reconcile_runs WHERE kind = 'detected'") == found)
            #expect(try await rehearsal.db.count("SELECT count(*) FROM reconcile_runs WHERE status = 'succeeded_with_rejections'") == 1)
            let export = try await rehearsal.export(), truth = try await rehearsal.truth()
            #expect(export == truth, "\(Rehearsal.difference(export, truth))")
        }
    }

    /// A scheduled window that left Apple's retention unfinished is lost, loudly (exit 4),
    /// and the chain moves on from its end.
    @Test func aScheduledWindowThatLeftRetentionIsLostAndTheChainMovesOn() async throws {
        try await Rehearsal.with(customers: 10, seed: 67) { rehearsal in
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            let end = now - 3_600_000
            try await rehearsal.db.execute(
                """
                INSERT INTO reconcile_runs (kind, environment, bundle_id, window_start_ms, window_end_ms, status, phase)
                VALUES ('scheduled', 'Production', 'com.example.reconciler.mock', \(now - 200 * 86_400_000), \(end), 'interrupted', 'replay')
                """)
            let next = try await rehearsal.reconciler(["run", "--since-last"])
            #expect(next.status == 4, "\(next.stdout)\n\(next.stderr)")
            #expect(next.stdout.contains("LOST: scheduled run 1"))
            #expect(try await rehearsal.db.count("SELECT count(*) FROM reconcile_runs WHERE run_id = 1 AND status = 'lost'") == 1)
            #expect(try await rehearsal.db.count("SELECT window_start_ms FROM reconcile_runs WHERE run_id = 2") == end - 3_600_000)
            #expect(try await rehearsal.db.count("SELECT count(*) FROM reconcile_runs WHERE run_id = 2 AND status = 'succeeded'") == 1)
            // The chain went on: the next hour starts from run 2.
            #expect(try await rehearsal.reconciler(["run", "--since-last"]).status == 0)
        }
    }

    /// Quarantined payloads advance the schedule: the run that quarantines them exits 4, the
    /// next scheduled run starts where it ended and exits 0.
    @Test func quarantinedPayloadsDoNotPinTheSchedule() async throws {
        try await Rehearsal.with(customers: 30, seed: 53, mockArguments: ["--forged", "2"]) { rehearsal in
            // The first scheduled window reaches back over the outage (the newest live notification is after it).
            let first = try await rehearsal.reconciler(["run", "--since-last", "--overlap", "8h"])
            #expect(first.status == 4, "\(first.stdout)\n\(first.stderr)")
            let firstEnd = try await rehearsal.db.count("SELECT window_end_ms FROM reconcile_runs WHERE run_id = 1")
            let second = try await rehearsal.reconciler(["run", "--since-last", "--overlap", "8h"])
            #expect(second.status == 0, "\(second.stdout)\n\(second.stderr)")
            #expect(try await rehearsal.db.count("SELECT window_start_ms FROM reconcile_runs WHERE run_id = 2") == firstEnd - 8 * 3_600_000)
            #expect(try await rehearsal.db.count("SELECT count(*) FROM run_rejections WHERE run_id = 2 AND NOT newly_quarantined") == 2)
            #expect(try await rehearsal.db.count("SELECT count(*) FROM quarantined_payloads") == 2)
        }
    }

    /// Once every due customer was checked, a quiet hour reads no transaction history at
    /// all: the at-risk set is what happened or fell due since, not the customer base.
    @Test func aQuietHourReadsNoTransactionHistory() async throws {
        try await Rehearsal.with(customers: 80, seed: 55) { rehearsal in
            let outage = try await rehearsal.runWindow()
            #expect(outage.status == 0, "\(outage.stderr)")
            // The first scheduled run checks what fell due since the outage window ended.
            let catchUp = try await rehearsal.reconciler(["run", "--since-last"])
            #expect(catchUp.status == 0, "\(catchUp.stderr)")
            let quietPath = rehearsal.file("quiet.json")
            try await rehearsal.resetMockStatistics()
            let quiet = try await rehearsal.reconciler(["run", "--since-last", "--report-json", quietPath])
            #expect(quiet.status == 0, "\(quiet.stderr)")
            let report = try Rehearsal.report(quietPath)
            #expect(report["customersChecked"] as? Int == 0)
            #expect(report["transactionsFetched"] as? Int == 0)
            let requests = try await rehearsal.mockStatistics()["requests"] as? [String: Int] ?? [:]
            #expect((requests["getTransactionHistory"] ?? 0) == 0, "\(requests)")
            #expect(try await rehearsal.db.count("SELECT count(*) FROM purchases WHERE history_checked_at_ms IS NOT NULL") > 0)
        }
    }

    /// A stored revision Apple refuses (4000005) is dropped, the customer's history read from
    /// the start once, and the report says so; the next run uses the new revision.
    @Test func aRevisionAppleRefusesIsDroppedAndTheHistoryReadFromTheStart() async throws {
        try await Rehearsal.with(customers: 30, seed: 57) { rehearsal in
            let first = try await rehearsal.runWindow()
            #expect(first.status == 0, "\(first.stderr)")
            let stored = try await rehearsal.db.count("SELECT count(*) FROM history_revisions")
            #expect(stored > 0)
            try await rehearsal.db.execute("UPDATE history_revisions SET revision = 'refused-by-apple'")
            let reportPath = rehearsal.file("reset.json")
            let reset = try await rehearsal.runWindow(["--all", "--report-json", reportPath])
            #expect(reset.status == 0, "\(reset.stdout)\n\(reset.stderr)")
            #expect(reset.stdout.contains("Apple refused the stored revision of \(stored) customers"))
            #expect((try Rehearsal.report(reportPath)["revisionResets"] as? [String])?.count == stored)
            #expect(try await rehearsal.db.count("SELECT count(*) FROM history_revisions WHERE revision = 'refused-by-apple'") == 0)
            let again = rehearsal.file("again.json")
            #expect(try await rehearsal.runWindow(["--all", "--report-json", again]).status == 0)
            #expect((try Rehearsal.report(again)["revisionResets"] as? [String])?.isEmpty == true)
            let export = try await rehearsal.export(), truth = try await rehearsal.truth()
            #expect(export == truth, "\(Rehearsal.difference(export, truth))")
        }
    }

    /// A dry run reports exactly the changes the real run then makes.
    @Test func aDryRunReportsExactlyWhatTheRealRunChanges() async throws {
        try await Rehearsal.with(customers: 70, seed: 59) { rehearsal in
            let dryPath = rehearsal.file("dry.json"), realPath = rehearsal.file("real.json")
            let fingerprint = try await rehearsal.db.stateFingerprint()
            let dry = try await rehearsal.runWindow(["--dry-run", "--refresh-status", "--report-json", dryPath])
            #expect(dry.status == 0, "\(dry.stderr)")
            #expect(try await rehearsal.db.stateFingerprint() == fingerprint)
            #expect(try await rehearsal.db.count("SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'reconciler_dry_run_%'") == 0)
            let real = try await rehearsal.runWindow(["--refresh-status", "--report-json", realPath])
            #expect(real.status == 0, "\(real.stderr)")
            let dryReport = try Rehearsal.report(dryPath), realReport = try Rehearsal.report(realPath)
            let dryChanges = try JSONSerialization.data(withJSONObject: dryReport["changes"] ?? [], options: .sortedKeys)
            let realChanges = try JSONSerialization.data(withJSONObject: realReport["changes"] ?? [], options: .sortedKeys)
            #expect((realReport["changes"] as? [Any])?.isEmpty == false)
            #expect(dryChanges == realChanges)
            // Which replayed notification changed its purchase and which found its data stored
            // already (recorded only) depends on whether phase 2, beside it, read that customer's
            // history first: the split between the two may differ; every other count may not.
            let dryCounts = dryReport["notifications"] as? [String: Int] ?? [:], realCounts = realReport["notifications"] as? [String: Int] ?? [:]
            for outcome in ["seen", "duplicate", "stale", "rejected"] { #expect(dryCounts[outcome] == realCounts[outcome], "\(outcome)") }
            #expect(
                (dryCounts["applied"] ?? 0) + (dryCounts["recorded"] ?? 0) == (realCounts["applied"] ?? 0) + (realCounts["recorded"] ?? 0),
                "dry \(dryCounts), real \(realCounts)")
            #expect(dryReport["customersChecked"] as? Int == realReport["customersChecked"] as? Int)
        }
    }

    /// A pool that could starve the run is refused at start, with what to change.
    @Test func aPoolThatCouldStarveIsRefusedWithWhatToChange() async throws {
        try await TestDatabase.with { db in
            let result = try await runProcess(
                "reconciler",
                [
                    "run", "--start", "now-1h", "--max-connections", "5", "--concurrency", "2", "--gap-concurrency", "2",
                ], environment: ["DATABASE_URL": db.url, "APP_STORE_BUNDLE_ID": "com.example", "APP_STORE_ENVIRONMENT": "sandbox"])
            #expect(result.status == 1)
            #expect(result.stderr.contains("--max-connections 7"), "\(result.stderr)")
            let worker = try await runProcess(
                "reconciler", ["work", "--run", "1", "--max-connections", "4", "--concurrency", "4"],
                environment: ["DATABASE_URL": db.url, "APP_STORE_BUNDLE_ID": "com.example"])
            #expect(worker.status == 1)
            #expect(worker.stderr.contains("at least 6"), "\(worker.stderr)")
        }
    }

    /// The live webhook never waits on a run: no transaction spans a call to Apple (the mock
    /// answers after 800 ms, so one that did would sit idle in transaction that long), and every live POST made
    /// during `run --all --refresh-status` with latency and 429s is answered and stored.
    @Test func theLiveWebhookNeverWaitsOnARun() async throws {
        try await Rehearsal.with(customers: 30, seed: 63, mockArguments: ["--latency-ms", "800", "--fault-429", "0.1"]) { rehearsal in
            let payloads = try await rehearsal.db.signedPayloads(
                """
                SELECT DISTINCT ON (original_transaction_id) notification_uuid FROM notifications
                WHERE source = 'webhook' AND original_transaction_id IS NOT NULL ORDER BY original_transaction_id, signed_date_ms DESC LIMIT 25
                """)
            #expect(payloads.count >= 20)
            func post(_ payload: String) async throws -> Duration {
                let start = ContinuousClock.now
                let reply = try await HTTP.postNotification(rehearsal.webhookURL, signedPayload: payload)
                #expect(reply.status == 200)
                return ContinuousClock.now - start
            }
            var idle: [Duration] = []
            for payload in payloads { idle.append(try await post(payload)) }

            let run = try rehearsal.start([
                "run", "--start", rehearsal.outageStart, "--end", rehearsal.outageEnd, "--all", "--refresh-status",
                "--concurrency", "4", "--gap-concurrency", "8",
            ])
            var during: [Duration] = []
            var longestTransaction = 0
            var refunds: [String] = []
            let refundable = try await rehearsal.db.strings("SELECT transaction_id FROM transactions WHERE revocation_date_ms IS NULL LIMIT 3")
            while run.process.isRunning {
                for payload in payloads.prefix(5) { during.append(try await post(payload)) }
                if let transaction = refundable.dropFirst(refunds.count).first {
                    let reply = try await HTTP.request(.POST, "\(rehearsal.mockURL)/mock/refund?transactionId=\(transaction)")
                    refunds.append(reply.json["notificationUUID"] as? String ?? "")
                }
                // A transaction waiting on Apple sits idle in transaction for a whole call; one that is
                // merely slow on a loaded machine keeps executing statements.
                longestTransaction = max(
                    longestTransaction,
                    try await rehearsal.db.count(
                        """
                        SELECT COALESCE(max((extract(epoch FROM now() - state_change) * 1000)::bigint), 0) FROM pg_stat_activity
                        WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'idle in transaction'
                        """))
            }
            let result = try await run.wait()
            #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
            #expect(longestTransaction < 800, "a transaction waited \(longestTransaction) ms between statements, as long as a call to Apple")
            #expect(!during.isEmpty)
            // The refunds the mock delivered live during the run are stored.
            for uuid in refunds where !uuid.isEmpty {
                try await eventually("live REFUND \(uuid)", timeout: .seconds(30)) {
                    try await rehearsal.db.count("SELECT count(*) FROM notifications WHERE notification_uuid = \(uuid)") == 1
                }
            }
            func p99(_ values: [Duration]) -> Double {
                let sorted = values.sorted()
                let value = sorted[min(sorted.count - 1, Int(Double(sorted.count) * 0.99))]
                return Double(value.components.seconds) * 1000 + Double(value.components.attoseconds) / 1e15
            }
            print(
                "live POST latency p99: idle \(String(format: "%.1f", p99(idle))) ms (\(idle.count) POSTs), "
                    + "during the run \(String(format: "%.1f", p99(during))) ms (\(during.count) POSTs); longest idle in transaction \(longestTransaction) ms"
            )
        }
    }

    /// A run that loses its lease stops (it may no longer own the run) and a rerun resumes it.
    @Test func aRunThatLosesItsLeaseStopsAndTheRerunResumesIt() async throws {
        try await Rehearsal.with(customers: 40, seed: 65, mockArguments: ["--latency-ms", "100"]) { rehearsal in
            let run = try rehearsal.start([
                "run", "--start", rehearsal.outageStart, "--end", rehearsal.outageEnd, "--concurrency", "1",
                "--lease-duration", "3s",
            ])
            try await eventually("a committed page") {
                try await rehearsal.db.count("SELECT COALESCE(sum(pages_done), 0)::bigint FROM run_shards") > 0
            }
            try await rehearsal.db.execute("UPDATE run_leases SET holder = 'elsewhere:1:1'")
            let stopped = try await run.wait(timeout: .seconds(60))
            #expect(stopped.status == 2, "\(stopped.stdout)\n\(stopped.stderr)")
            #expect(stopped.stderr.contains("lost the run lease"), "\(stopped.stderr)")
            try await rehearsal.db.execute("DELETE FROM run_leases")
            let resumed = try await rehearsal.runWindow()
            #expect(resumed.status == 0, "\(resumed.stderr)")
            #expect(try await rehearsal.db.count("SELECT count(*) FROM reconcile_runs") == 1)
            let export = try await rehearsal.export(), truth = try await rehearsal.truth()
            #expect(export == truth, "\(Rehearsal.difference(export, truth))")
        }
    }

    /// PostgreSQL restarting in the middle of a run is survived: the run reconnects and
    /// finishes (or exits 2 and the rerun resumes), never hangs, never runs twice.
    @Test func aRunSurvivesAPostgreSQLRestart() async throws {
        try await PrivateCluster.with { cluster in
            try await Rehearsal.with(customers: 60, seed: 69, mockArguments: ["--latency-ms", "80"], databaseServer: cluster.url) { rehearsal in
                let run = try rehearsal.start([
                    "run", "--start", rehearsal.outageStart, "--end", rehearsal.outageEnd,
                    "--concurrency", "2", "--gap-concurrency", "2",
                ])
                try await eventually("committed pages") {
                    try await rehearsal.db.count("SELECT COALESCE(sum(pages_done), 0)::bigint FROM run_shards") > 5
                }
                try await cluster.restart()
                var result = try await run.wait(timeout: .seconds(180))
                #expect(result.status == 0 || result.status == 2, "\(result.stdout)\n\(result.stderr)")
                if result.status == 2 { result = try await rehearsal.runWindow() }
                #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
                #expect(try await rehearsal.db.count("SELECT count(*) FROM reconcile_runs") == 1)
                let recorded = try await rehearsal.db.count(
                    """
                    SELECT COALESCE(sum(count), 0)::bigint FROM run_counts WHERE outcome IN ('applied', 'stale', 'recorded')
                    """)
                #expect(recorded == (try await rehearsal.db.count("SELECT count(*) FROM notifications WHERE source = 'history'")))
                let export = try await rehearsal.export(), truth = try await rehearsal.truth()
                #expect(export == truth, "\(Rehearsal.difference(export, truth))")
            }
        }
    }

    /// With the database gone for good, a run exits 2 after --database-timeout, naming the
    /// database; and a run that dies while it waits on a database that is gone (here SIGKILL) is
    /// resumed by the rerun. (That a signal ends such a wait at once, exit 2, is in process:
    /// GracefulShutdownTests.workWaitingOnADatabaseThatIsGoneEndsAsAnInterruption; run's exit 2 on
    /// SIGTERM is ReconcileRunTests.sigtermStopsARunCleanlyAndTheRerunResumesIt.)
    @Test
    func aRunWhoseDatabaseIsGoneExitsInBoundedTimeAndIsResumed() async throws {
        try await PrivateCluster.with { cluster in
            try await Rehearsal.with(customers: 40, seed: 71, mockArguments: ["--latency-ms", "80"], databaseServer: cluster.url) { rehearsal in
                let databaseName = rehearsal.db.name
                let bounded = try rehearsal.start([
                    "run", "--start", rehearsal.outageStart, "--end", rehearsal.outageEnd,
                    "--concurrency", "2", "--database-timeout", "5s",
                ])
                try await eventually("committed pages") {
                    try await rehearsal.db.count("SELECT COALESCE(sum(pages_done), 0)::bigint FROM run_shards") > 2
                }
                try await cluster.stop()
                let gone = try await bounded.wait(timeout: .seconds(120))
                #expect(gone.status == 2, "\(gone.stdout)\n\(gone.stderr)")
                #expect(gone.stderr.contains("127.0.0.1:\(cluster.port)/\(databaseName)"), "\(gone.stderr)")
                #expect(gone.stderr.contains("unreachable") || gone.stderr.contains("lost the run lease"), "\(gone.stderr)")

                // Waiting on a database that does not come back, with a long timeout: ended, it is resumed.
                try await cluster.start()
                let waiting = try rehearsal.start([
                    "run", "--start", rehearsal.outageStart, "--end", rehearsal.outageEnd,
                    "--concurrency", "2", "--database-timeout", "10m",
                ])
                try await eventually("the second run to hold the lease") {
                    try await rehearsal.db.count("SELECT count(*) FROM run_leases WHERE holder LIKE \("%:\(waiting.process.processIdentifier):%")")
                        == 1
                }
                try await cluster.stop()
                waiting.kill()
                try await cluster.start()
                let resumed = try await rehearsal.runWindow()
                #expect(resumed.status == 0, "\(resumed.stdout)\n\(resumed.stderr)")
                let export = try await rehearsal.export(), truth = try await rehearsal.truth()
                #expect(export == truth, "\(Rehearsal.difference(export, truth))")
            }
        }
    }

}
