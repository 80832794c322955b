import AppStoreServer
import Foundation
import MockAppStore
import NIOHTTP1
import PostgresNIO
import ReconcilerDomain
import TestSupport
import Testing

@testable import Reconciler

/// Forwarding: what Apple failed to deliver reaches the app's own webhook, once, through a durable
/// queue: real processes (`mock-appstore`, `reconciler serve`, `reconciler run`), a real
/// PostgreSQL, and the app's handler imitated by ``AppWebhookReceiver`` over real HTTP.
@Suite(.serialized) struct ForwardingTests {
    /// One notification of the mock's scenario, as `GET /mock/notifications` lists it.
    struct MockNotification: Decodable {
        var notificationUUID: String
        var notificationType: String
        var subtype: String?
        var firstAttemptDate: Int64
        var delivered: Bool
        var forged: Bool
    }

    static func notifications(of rehearsal: Rehearsal) async throws -> [MockNotification] {
        let body = try await HTTP.request(.GET, "\(rehearsal.mockURL)/mock/notifications").body
        return try String(decoding: body, as: UTF8.self).split(separator: "\n").map {
            try JSONDecoder().decode(MockNotification.self, from: Data($0.utf8))
        }
    }

    /// The genuine notifications of the outage window that Apple never delivered: what a run must forward.
    static func undelivered(_ notifications: [MockNotification], in rehearsal: Rehearsal) throws -> [MockNotification] {
        let formatter = ISO8601DateFormatter()
        guard let start = formatter.date(from: rehearsal.outageStart), let end = formatter.date(from: rehearsal.outageEnd) else {
            throw ProcessFailure(description: "unreadable outage window")
        }
        let (from, to) = (Int64(start.timeIntervalSince1970 * 1000), Int64(end.timeIntervalSince1970 * 1000))
        return notifications.filter { !$0.forged && !$0.delivered && $0.firstAttemptDate >= from && $0.firstAttemptDate < to }
    }

    /// The live webhook forwards each notification it stores; a run forwards each one of its
    /// window that Apple did not deliver; the app's handler acknowledges every genuine one exactly
    /// once, although it answered 500 for a while both times; forged ones are never forwarded;
    /// every delivery is signed; the secret appears in no output.
    @Test func serveAndRunForwardEveryNotificationOnceAcrossAnAppThatFailsForAWhile() async throws {
        let secret = "forwarding-secret-\(UUID().uuidString)"
        try await AppWebhookReceiver.withRunning(.init(secret: secret, failFirst: 12)) { receiver, receiverURL in
            let forwarding = ["--forward-to", receiverURL, "--forward-backoff", "100ms"]
            try await Rehearsal.with(
                customers: 40, seed: 61, mockArguments: ["--forged", "2"],
                environment: ["RECONCILER_FORWARD_SECRET": secret], serveArguments: forwarding
            ) { rehearsal in
                let notifications = try await Self.notifications(of: rehearsal)
                let live = Set(notifications.filter { $0.delivered && !$0.forged }.map(\.notificationUUID))
                let outage = try Self.undelivered(notifications, in: rehearsal)
                let forged = Set(notifications.filter(\.forged).map(\.notificationUUID))
                #expect(!live.isEmpty && !outage.isEmpty && forged.count == 2)
                // Every kind of payload is in the outage, those without `data` included.
                let outageTypes = Set(outage.map(\.notificationType))
                #expect(outageTypes.isSuperset(of: ["RENEWAL_EXTENSION", "EXTERNAL_PURCHASE_TOKEN"]), "\(outageTypes)")

                // The live webhook forwarded what it stored, through the app's first 12 failures.
                try await eventually("the live notifications forwarded") {
                    Set(receiver.statistics.acknowledged.keys) == live
                }
                #expect(receiver.statistics.failed == 12)

                // The app goes down again while the run forwards; it comes back after 10 more failures.
                receiver.setBehaviour(.init(status: 503))
                let comesBack = Task {
                    try await eventually("the run's deliveries failing") { receiver.statistics.failed >= 22 }
                    receiver.setBehaviour(.init(status: 200))
                }
                let reportPath = rehearsal.file("report.json")
                let run = try await rehearsal.reconciler(
                    [
                        "run", "--start", rehearsal.outageStart, "--end", rehearsal.outageEnd, "--forward-drain-timeout", "120s", "--report-json",
                        reportPath,
                    ]
                        + forwarding, environment: ["LOG_LEVEL": "debug"])
                try await comesBack.value
                // 4: the forged payloads were quarantined for the first time (never applied, never forwarded).
                #expect(run.status == 4, "\(run.stderr)")

                let statistics = receiver.statistics
                let expected = live.union(outage.map(\.notificationUUID))
                #expect(Set(statistics.acknowledged.keys) == expected)
                #expect(statistics.acknowledged.values.allSatisfy { $0 == 1 }, "a notification was acknowledged twice")
                #expect(forged.isDisjoint(with: statistics.acknowledged.keys))
                #expect(Set(statistics.notificationTypes.keys).isSuperset(of: outageTypes))
                #expect(statistics.badSignatures == 0 && statistics.malformed == 0)

                let report = try Rehearsal.report(reportPath)
                let forwarded = report["forwarding"] as? [String: Any]
                #expect(forwarded?["delivered"] as? Int == outage.count)
                #expect(forwarded?["pending"] as? Int == 0 && forwarded?["failed"] as? Int == 0)
                #expect(run.stdout.contains("forwarded    \(outage.count) notifications delivered"), "\(run.stdout)")
                #expect(!run.stdout.contains(secret) && !run.stderr.contains(secret) && !rehearsal.serve.stderr.contains(secret))

                let status = try await rehearsal.reconciler(["status"])
                #expect(status.stdout.contains("forward queue: \(expected.count) delivered, 0 pending"), "\(status.stdout)")
                // A second run of the window forwards nothing again.
                let again = try await rehearsal.runWindow(forwarding + ["--fresh"])
                #expect(again.status == 0, "\(again.stderr)")
                #expect(receiver.statistics.acknowledged.values.allSatisfy { $0 == 1 })
            }
        }
    }

    /// A run killed while it forwards repeats, when rerun, only deliveries the app had answered
    /// but the run had not yet recorded; every one is delivered in the end.
    @Test func aKilledRunRepeatsOnlyDeliveriesWhoseAnswerWasNotRecorded() async throws {
        try await AppWebhookReceiver.withRunning(.init(delayMilliseconds: 150)) { receiver, receiverURL in
            try await Rehearsal.with(customers: 60, seed: 62) { rehearsal in
                let outage = Set(try Self.undelivered(try await Self.notifications(of: rehearsal), in: rehearsal).map(\.notificationUUID))
                let arguments = [
                    "run", "--start", rehearsal.outageStart, "--end", rehearsal.outageEnd, "--forward-to", receiverURL, "--forward-unsigned",
                    "--forward-concurrency", "4", "--forward-drain-timeout", "120s",
                ]
                let killed = try rehearsal.start(arguments)
                try await eventually("some deliveries") { receiver.statistics.acknowledged.count >= 6 }
                killed.signal(SIGKILL)
                let killedOutput = try await killed.wait()
                // Requests the killed run had sent are answered, then nothing more arrives.
                try await eventually("the receiver idle") { receiver.statistics.inFlight == 0 }
                let answeredBeforeKill = Set(receiver.statistics.acknowledged.keys)
                let recorded = Set(try await rehearsal.db.strings("SELECT notification_uuid FROM forward_queue WHERE status = 'delivered'"))
                #expect(recorded.isSubset(of: answeredBeforeKill))

                let rerun = try await rehearsal.reconciler(Array(arguments))
                #expect(rerun.status == 0, "\(rerun.stderr)")
                let acknowledged = receiver.statistics.acknowledged
                let missing = outage.subtracting(acknowledged.keys).sorted()
                let missingRows = try await rehearsal.db.strings(
                    """
                    SELECT notification_uuid || ' ' || status || ' held ' || held || ' attempts ' || attempts || ' run ' || coalesce(run_id::text, '-')
                        || ' due in ' || round(extract(epoch FROM next_attempt_at - now()))::text || ' s'
                    FROM forward_queue WHERE notification_uuid = ANY(\(missing)::text[])
                    """)
                #expect(
                    missing.isEmpty,
                    "undelivered: \(missingRows)\nthe rerun:\n\(rerun.stdout)\n\(rerun.stderr)\nthe killed run:\n\(killedOutput.stderr)")
                #expect(Set(acknowledged.keys) == outage)
                let repeated = Set(acknowledged.filter { $0.value > 1 }.keys)
                #expect(repeated.isSubset(of: answeredBeforeKill.subtracting(recorded)), "only unrecorded answers may repeat")
                #expect(acknowledged.values.allSatisfy { $0 <= 2 })
                #expect(repeated.count <= 4 * 4, "at most one leased batch")
            }
        }
    }

    /// A run killed while it drains its deliveries (its windows finished, the app still refusing)
    /// has recorded its status, so rerunning the command starts a new run, which records nothing new:
    /// the rerun still delivers what the killed run left queued before it ends (its output promised
    /// that "the next run delivers the rest"), and counts them apart from its own.
    @Test func aRunKilledWhileItDrainsLeavesItsDeliveriesToTheRerun() async throws {
        try await AppWebhookReceiver.withRunning(.init()) { receiver, receiverURL in
            try await Rehearsal.with(customers: 30, seed: 64) { rehearsal in
                receiver.setBehaviour(.init(status: 503))
                let outage = Set(try Self.undelivered(try await Self.notifications(of: rehearsal), in: rehearsal).map(\.notificationUUID))
                // A backoff longer than the rerun's windows take: what the killed run tried waits for the rerun's drain.
                let arguments = [
                    "run", "--start", rehearsal.outageStart, "--end", rehearsal.outageEnd, "--forward-to", receiverURL, "--forward-unsigned",
                    "--forward-backoff", "15s", "--forward-drain-timeout", "120s",
                ]
                let killed = try rehearsal.start(arguments)
                // Every delivery tried once (and backed off): one still due would be delivered by the
                // rerun's windows, before its drain looks for earlier runs' deliveries.
                try await eventually("the run finished and draining, every delivery tried") {
                    let untried = try await rehearsal.db.count("SELECT count(*) FROM forward_queue WHERE run_id = 1 AND attempts = 0")
                    return try await rehearsal.db.count("SELECT count(*) FROM reconcile_runs WHERE run_id = 1 AND status <> 'running'") == 1
                        && receiver.statistics.failed > 0 && untried == 0
                }
                #expect(killed.process.isRunning, "the run ended before it was killed in its drain")
                killed.signal(SIGKILL)
                _ = try await killed.wait()
                #expect(receiver.statistics.acknowledged.isEmpty)
                receiver.setBehaviour(.init(status: 200))

                let rerun = try await rehearsal.reconciler(arguments)
                #expect(rerun.status == 0, "\(rerun.stderr)")
                #expect(try await rehearsal.db.count("SELECT count(*) FROM reconcile_runs") == 2, "the rerun is a run of its own")
                #expect(Set(receiver.statistics.acknowledged.keys) == outage, "\(rerun.stdout)")
                #expect(try await rehearsal.db.count("SELECT count(*) FROM forward_queue WHERE status <> 'delivered'") == 0)
                #expect(rerun.stdout.contains("forwarded    0 notifications delivered to the app's webhook, 0 pending, 0 failed"), "\(rerun.stdout)")
                #expect(
                    rerun.stdout.contains("forwarded    earlier runs' deliveries (run 1): \(outage.count) delivered, 0 pending, 0 failed"),
                    "\(rerun.stdout)")
            }
        }
    }

    /// A run resumed past its replay (so it never replays, nor ends a hold) releases the deliveries
    /// it still held back: its drain does so first, however short (`--forward-drain-timeout 0s`),
    /// so they are due at once, not when the hold would have run out ten minutes later.
    @Test func aRunResumedPastItsReplayReleasesWhatItStillHeld() async throws {
        try await AppWebhookReceiver.withRunning(.init()) { _, receiverURL in
            try await Rehearsal.with(customers: 20, seed: 64) { rehearsal in
                let forwarding = ["--forward-to", receiverURL, "--forward-unsigned", "--forward-drain-timeout", "0s"]
                let first = try await rehearsal.runWindow(forwarding)
                #expect(first.status == 0, "\(first.stderr)")
                // As a process killed in its gap-fill phase would leave them: held back, never tried (the
                // first run's drain of 0 s may have sent some already under load).
                try await rehearsal.db.execute(
                    """
                    UPDATE forward_queue SET status = 'pending', held = true, attempts = 0, next_attempt_at = now() + interval '10 minutes',
                        lease_until = NULL, lease_token = NULL, worker = NULL, last_status_code = NULL, last_error = NULL, delivered_at = NULL
                    WHERE run_id IS NOT NULL
                    """)
                try await rehearsal.db.execute("UPDATE reconcile_runs SET status = 'interrupted', phase = 'gap_fill', finished_at = NULL")
                let held = try await rehearsal.db.count("SELECT count(*) FROM forward_queue WHERE held")
                #expect(held > 0)
                let resumed = try await rehearsal.runWindow(forwarding)
                #expect(resumed.status == 0, "\(resumed.stderr)")
                #expect(try await rehearsal.db.count("SELECT count(*) FROM reconcile_runs") == 1)
                #expect(try await rehearsal.db.count("SELECT count(*) FROM forward_queue WHERE held") == 0)
                #expect(try await rehearsal.db.count("SELECT count(*) FROM forward_queue WHERE status = 'pending' AND next_attempt_at > now()") == 0)
            }
        }
    }

    /// Deliveries the app keeps refusing are marked failed after --forward-attempts, never make
    /// the run partial, and `forward --once --retry-failed` delivers them once the app is back.
    @Test func failedDeliveriesAreRetriedByTheForwardWorker() async throws {
        try await AppWebhookReceiver.withRunning(.init()) { receiver, receiverURL in
            try await Rehearsal.with(customers: 30, seed: 63) { rehearsal in
                let outage = Set(try Self.undelivered(try await Self.notifications(of: rehearsal), in: rehearsal).map(\.notificationUUID))
                receiver.setBehaviour(.init(status: 500))
                let run = try await rehearsal.runWindow([
                    "--forward-to", receiverURL, "--forward-unsigned", "--forward-attempts", "2", "--forward-backoff", "50ms",
                    "--forward-drain-timeout", "60s",
                ])
                #expect(run.status == 0, "forwarding failures do not make a run partial: \(run.stderr)")
                #expect(run.stdout.contains("0 notifications delivered to the app's webhook, 0 pending, \(outage.count) failed"), "\(run.stdout)")
                #expect(receiver.statistics.acknowledged.isEmpty)

                // Still down: the worker has nothing due (failed ones wait for --retry-failed), exit 0.
                let idle = try await rehearsal.reconciler(["forward", "--once", "--forward-to", receiverURL, "--forward-unsigned"])
                #expect(idle.status == 0, "\(idle.stderr)")
                // Retried while still down: they fail for good again, which needs a person (4).
                let stillDown = try await rehearsal.reconciler(
                    ["forward", "--once", "--retry-failed", "--forward-attempts", "1"],
                    environment: ["RECONCILER_FORWARD_TO": receiverURL, "RECONCILER_FORWARD_UNSIGNED": "1"])
                #expect(stillDown.status == 4, "\(stillDown.stderr)")

                receiver.setBehaviour(.init(status: 200))
                let back = try await rehearsal.reconciler([
                    "forward", "--once", "--retry-failed", "--forward-backoff", "50ms", "--forward-to", receiverURL, "--forward-unsigned",
                ])
                #expect(back.status == 0, "\(back.stderr)")
                #expect(Set(receiver.statistics.acknowledged.keys) == outage)
                #expect(receiver.statistics.acknowledged.values.allSatisfy { $0 == 1 })
                #expect(try await rehearsal.db.count("SELECT count(*) FROM forward_queue WHERE status <> 'delivered'") == 0)
            }
        }
    }

    /// A webhook URL's credentials and query reach no output, report, log or
    /// table; the queue keeps the URL's id, so a forwarder given another URL leaves those
    /// deliveries alone and says what delivers them, and one given the same URL delivers them.
    @Test func aForwardURLsCredentialsAndQueryAreNeitherPrintedNorStored() async throws {
        let (password, token) = ("pw-\(UUID().uuidString)", "tok-\(UUID().uuidString)")
        try await AppWebhookReceiver.withRunning(.init()) { receiver, receiverURL in
            var components = try #require(URLComponents(string: receiverURL))
            (components.user, components.password, components.query) = ("app", password, "token=\(token)")
            let url = try #require(components.string)
            try await Rehearsal.with(customers: 20, seed: 65, environment: ["LOG_LEVEL": "debug"]) { rehearsal in
                let outage = Set(try Self.undelivered(try await Self.notifications(of: rehearsal), in: rehearsal).map(\.notificationUUID))
                let reportPath = rehearsal.file("report.json")
                defer { try? FileManager.default.removeItem(atPath: reportPath) }
                // The app is down during the run: its deliveries stay queued.
                receiver.setBehaviour(.init(status: 503))
                let run = try await rehearsal.runWindow([
                    "--forward-to", url, "--forward-unsigned", "--report-json", reportPath, "--forward-drain-timeout", "0s", "--forward-backoff",
                    "50ms",
                ])
                #expect(run.status == 0, "\(run.stderr)")
                #expect(receiver.statistics.acknowledged.isEmpty)
                receiver.setBehaviour(.init(status: 200))
                // Another webhook's forwarder delivers none of them, and says what does.
                let other = try await rehearsal.reconciler(["forward", "--once", "--forward-to", "http://127.0.0.1:9/other", "--forward-unsigned"])
                #expect(other.status == 0, "\(other.stderr)")
                #expect(other.stdout.contains("pending for another webhook, http://…@127.0.0.1:"), "\(other.stdout)")
                #expect(receiver.statistics.acknowledged.isEmpty)
                let forward = try await rehearsal.reconciler([
                    "forward", "--once", "--forward-to", url, "--forward-unsigned", "--forward-backoff", "50ms",
                ])
                #expect(forward.status == 0, "\(forward.stderr)")
                #expect(Set(receiver.statistics.acknowledged.keys) == outage)

                let status = try await rehearsal.reconciler(["status", "--json"])
                let statusText = try await rehearsal.reconciler(["status", "--run", "1"])
                let stored = try await rehearsal.db.strings(
                    "SELECT options::text FROM reconcile_runs UNION ALL SELECT row_to_json(q)::text FROM forward_queue q")
                #expect(stored.count == 1 + outage.count)
                let report = try String(contentsOfFile: reportPath, encoding: .utf8)
                for (name, text) in [
                    ("run stdout", run.stdout), ("run stderr", run.stderr), ("status --json", status.stdout), ("status", statusText.stdout),
                    ("forward", other.stdout + other.stderr + forward.stdout + forward.stderr), ("report", report),
                    ("tables", stored.joined(separator: "\n")), ("serve", rehearsal.serve.stderr),
                ] {
                    #expect(!text.contains(password) && !text.contains(token), "\(name) holds a secret of the URL")
                }
                // The run's target, as its redacted URL (JSON escapes the slashes).
                #expect(status.stdout.contains("…@127.0.0.1:\(components.port!)\\/notifications?…"), "\(status.stdout)")
            }
        }
    }

    /// A bad --forward-to or an unreadable secret file is a configuration error that changes nothing.
    @Test func badForwardingSettingsChangeNothing() async throws {
        try await Rehearsal.with(customers: 10, seed: 64) { rehearsal in
            let before = try await rehearsal.db.stateFingerprint()
            for arguments in [
                ["--forward-to", "ftp://app.example.com/hook"], ["--forward-to", "not a url"],
                ["--forward-to", "https://app.example.com/hook", "--forward-secret-file", "/nonexistent/secret"],
                ["--forward-to", "https://app.example.com/hook", "--forward-timeout", "soon"],
            ] {
                let result = try await rehearsal.runWindow(arguments)
                #expect(result.status == 1, "\(arguments): \(result.stderr)")
            }
            #expect(try await rehearsal.db.count("SELECT count(*) FROM reconcile_runs") == 0)
            #expect(try await rehearsal.db.stateFingerprint() == before)
        }
    }
}
