import AppStoreServer
import Foundation
import MockAppStore
import PostgresNIO
import TestSupport
import Testing

@testable import ReconcilerStore

/// `reconciler forward`, the real process: as a long-running worker stopped by a real SIGTERM (its
/// exit code on a signal is part of the contract; how its forwarder shuts down is
/// GracefulShutdownTests, in process), and `--once`'s pass, words and exit codes.
@Suite struct ForwardCommandTests {
    let app: TestApp
    init() throws { app = try TestApp() }

    /// SIGTERM while the app holds a delivery: `forward` ends gracefully (exit 0, as `serve`; the
    /// README's "SIGTERM: graceful"), the delivery in flight is answered and recorded, nothing
    /// stays leased. Known issue: the command cancels its work on the signal (CommandLifecycle)
    /// instead of letting its forwarder shut down gracefully, as the forwarder alone does
    /// (GracefulShutdownTests): it exits 2 ("interrupted: rerun the same command") and leaves the
    /// delivery in flight leased and unrecorded, so the app gets it again after the lease.
    @Test func sigtermEndsTheWorkerGracefully() async throws {
        try await TestDatabase.with { db in
            try await AppWebhookReceiver.withRunning(.init()) { receiver, url in
                let uuids = try await app.recordForwarded(2, to: url, in: db, purchasePrefix: "sigterm")
                receiver.hold()
                let forward = try RunningProcess(
                    "reconciler", ["forward", "--forward-to", url, "--forward-unsigned", "--forward-concurrency", "1"],
                    environment: ["DATABASE_URL": db.url, "LOG_LEVEL": "info"])
                defer { forward.kill() }
                try await eventually("a delivery in flight") { receiver.statistics.inFlight == 1 }
                let inFlight = try #require(receiver.statistics.inFlightByNotification.keys.first)
                forward.signal(SIGTERM)
                receiver.release()
                let ended = try await forward.wait()
                let rows = try await db.strings(
                    "SELECT notification_uuid || ' ' || status || ' ' || attempts FROM forward_queue ORDER BY notification_uuid")
                #expect(rows.count == uuids.count, "\(rows)")
                #expect(ended.status == 0, "\(ended.stdout)\n\(ended.stderr)")
                #expect(!rows.contains { $0.contains(" leased ") }, "\(rows)")
                #expect(rows.contains("\(inFlight) delivered 1"), "\(rows)")
            }
        }
    }

    /// `forward --once` while the app's endpoint is down (nothing listens on its port) makes one
    /// pass and ends: each delivery due is tried once, waits in the queue with its backoff
    /// recorded, and the command exits 2 (pending). The failure reads in plain words with the
    /// URL's redacted form, in the log and in the queue, never a client library's type names
    /// (before: it waited out --drain-timeout's 5 minutes and logged "NIOCore.IOError error 1").
    @Test func forwardOnceAgainstADownEndpointTriesEachDeliveryOnceAndEnds() async throws {
        try await TestDatabase.with { db in
            let port = freePort()
            let url = "http://hooks:s3cret@127.0.0.1:\(port)/notifications?token=abc"
            let uuids = try await app.recordForwarded(3, to: url, in: db, purchasePrefix: "lease")
            let forward = try await runProcess(
                "reconciler", ["forward", "--once", "--forward-to", url, "--forward-backoff", "1h", "--forward-unsigned"],
                environment: ["DATABASE_URL": db.url, "LOG_LEVEL": "warning"], timeout: .seconds(120))
            #expect(forward.status == 2, "\(forward.stdout) \(forward.stderr)")
            #expect(forward.stdout.contains("queue: 0 delivered, 3 pending, 0 failed"), "\(forward.stdout)")
            let refused = "connection refused by http://…@127.0.0.1:\(port)/notifications?…"
            // Each tried once, and waiting its backoff (an hour, by the database's clock) for the next try.
            let rows = try await db.strings(
                """
                SELECT notification_uuid || ' ' || status || ' ' || attempts || ' ' || (next_attempt_at > now() + interval '50 minutes')
                    || ' ' || coalesce(last_error, '-')
                FROM forward_queue ORDER BY notification_uuid
                """)
            #expect(rows == uuids.sorted().map { "\($0) pending 1 true \(refused)" }, "\(rows)")
            #expect(forward.stderr.contains(refused), "\(forward.stderr)")
            for leak in ["NIOCore", "IOError", "NIOPosix", "s3cret", "token=abc"] {
                #expect(!(forward.stdout + forward.stderr).contains(leak), "\(leak) in \(forward.stderr)")
            }
        }
    }

    /// The oldest due delivery names a JWS header that `jws_headers` no longer holds (as after a
    /// restore from a backup taken before the header was stored): it cannot be rebuilt, so it is
    /// marked failed with its reason when it comes up, and the deliveries behind it are delivered.
    /// `forward --once` exits 4 and says why it failed; `status` counts it apart.
    @Test func aDeliveryThatCannotBeRebuiltFailsWithItsReasonAndTheQueueMovesOn() async throws {
        try await TestDatabase.with { db in
            try await AppWebhookReceiver.withRunning(.init()) { receiver, url in
                let uuids = try await app.recordForwarded(3, to: url, in: db, purchasePrefix: "lease")
                try await db.execute("UPDATE notifications SET header_sha256 = sha256('not stored'::bytea) WHERE notification_uuid = \(uuids[0])")
                let forward = try await db.reconciler(["forward", "--once", "--forward-to", url, "--forward-unsigned", "--drain-timeout", "30s"])
                #expect(forward.status == 4, "\(forward.stdout) \(forward.stderr)")
                #expect(receiver.statistics.acknowledged == [uuids[1]: 1, uuids[2]: 1], "\(receiver.statistics)")
                #expect(forward.stdout.contains("queue: 2 delivered, 0 pending, 1 failed"), "\(forward.stdout)")
                #expect(forward.stdout.contains("1 failed: its stored signed payload cannot be rebuilt"), "\(forward.stdout)")
                #expect(forward.stderr.contains("cannot be rebuilt"), "\(forward.stderr)")
                let failed = try await db.strings(
                    "SELECT status || ' ' || attempts || ' ' || coalesce(last_error, '-') FROM forward_queue WHERE notification_uuid = \(uuids[0])")
                #expect(failed.count == 1 && failed[0].hasPrefix("failed 0 payloadUnavailable: "), "\(failed)")
                #expect(failed.first?.hasSuffix("(JWS header \(Bytea.plainHex(JWSParts.sha256("not stored"))) not in jws_headers)") == true)
                let status = try await db.reconciler(["status"])
                #expect(status.stdout.contains("2 delivered, 0 pending, 1 failed"), "\(status.stdout)")
                #expect(status.stdout.contains("1 failed: its stored signed payload cannot be rebuilt"), "\(status.stdout)")
            }
        }
    }

    /// `forward --redeliver --target NAME`: the app's handler acknowledged two notifications (and
    /// dropped them); the window is queued again for the named target only, and the next
    /// `forward --once` sends each there once, with `Reconciler-Redelivery: 1`, while the other
    /// target gets nothing again. `--dry-run` counts what the real one then queues; usage is exit 1.
    @Test func aRedeliveryReachesOnlyTheNamedTargetOncePerNotification() async throws {
        try await TestDatabase.with { db in
            try await AppWebhookReceiver.withRunning(.init()) { live, liveURL in
                try await AppWebhookReceiver.withRunning(.init()) { replay, replayURL in
                    try await TemporaryDirectory.with("redeliver") { directory in
                        let config = directory.file("reconciler.yaml")
                        try """
                        key: {id: K, issuer: I, privateKeyPath: /nonexistent/AuthKey.p8}
                        apps:
                          - bundleId: \(TestApp.bundleId)
                            appAppleId: \(TestApp.appAppleId)
                            environments: [production]
                            forwardTo:
                              - {name: live, url: "\(liveURL)", unsigned: true}
                              - {name: replay, url: "\(replayURL)", unsigned: true, types: [REFUND]}
                        """.write(toFile: config, atomically: true, encoding: .utf8)
                        let uuids = try await app.recordForwarded(2, to: liveURL, in: db, purchasePrefix: "redeliver")
                        let environment = ["DATABASE_URL": db.url, "LOG_LEVEL": "warning"]
                        let once = try await runProcess("reconciler", ["forward", "--config", config, "--once"], environment: environment)
                        #expect(once.status == 0, "\(once.stdout) \(once.stderr)")
                        #expect(live.statistics.acknowledged == Dictionary(uniqueKeysWithValues: uuids.map { ($0, 1) }))

                        let window = ["--since", "now-1h", "--until", "2100-01-01T00:00:00Z"]
                        let arguments = ["forward", "--config", config, "--redeliver"] + window + ["--target", "live"]
                        let dry = try await runProcess("reconciler", arguments + ["--dry-run"], environment: environment)
                        #expect(dry.status == 0, "\(dry.stdout) \(dry.stderr)")
                        #expect(dry.stdout.contains("2 would be queued, 0 not sent"), "\(dry.stdout)")
                        let real = try await runProcess("reconciler", arguments, environment: environment)
                        #expect(real.status == 0, "\(real.stdout) \(real.stderr)")
                        #expect(real.stdout.contains("2 queued, 0 not sent"), "\(real.stdout)")
                        // The replay target takes REFUND only: nothing of this window for it.
                        let filtered = try await runProcess(
                            "reconciler", ["forward", "--config", config, "--redeliver"] + window + ["--target", "replay"], environment: environment)
                        #expect(filtered.stdout.contains("0 queued"), "\(filtered.stdout)")
                        let unknown = try await runProcess(
                            "reconciler", ["forward", "--config", config, "--redeliver"] + window + ["--target", "nowhere"], environment: environment)
                        #expect(unknown.status == 1, "\(unknown.stdout) \(unknown.stderr)")
                        let usage = try await runProcess("reconciler", ["forward", "--config", config, "--redeliver"], environment: environment)
                        #expect(usage.status == 1, "\(usage.stdout) \(usage.stderr)")

                        let again = try await runProcess("reconciler", ["forward", "--config", config, "--once"], environment: environment)
                        #expect(again.status == 0, "\(again.stdout) \(again.stderr)")
                        #expect(live.statistics.acknowledged == Dictionary(uniqueKeysWithValues: uuids.map { ($0, 2) }))
                        #expect(live.statistics.redelivered == Dictionary(uniqueKeysWithValues: uuids.map { ($0, 1) }))
                        #expect(replay.statistics.acknowledged.isEmpty, "\(replay.statistics.acknowledged)")
                    }
                }
            }
        }
    }
}
