import AppStoreServer
import Crypto
import Foundation
import MockAppStore
import NIOHTTP1
import PostgresNIO
import TestSupport
import Testing

/// Cron and on-call features end to end: --since-last, detect-outage and --detected,
/// check-webhook, the metrics file, and the runbook's commands exactly as written.
@Suite(.serialized) struct OperationsTests {

    @Test func sinceLastStartsWhereTheLastSuccessfulRunEndedMinusTheOverlap() async throws {
        try await Rehearsal.with(customers: 30, seed: 31) { rehearsal in
            let newestLive = try await rehearsal.db.count("SELECT max(signed_date_ms) FROM notifications WHERE source = 'webhook'")
            let first = rehearsal.file("first.json")
            let fromLive = try await rehearsal.reconciler(["run", "--since-last", "--overlap", "30m", "--report-json", first])
            #expect(fromLive.status == 0, "\(fromLive.stderr)")
            #expect(try Rehearsal.report(first)["windowStart"] as? Int == newestLive - 30 * 60_000)

            let windowEnd = try #require(Rehearsal.report(first)["windowEnd"] as? Int)
            let second = rehearsal.file("second.json")
            let fromRun = try await rehearsal.reconciler(["run", "--since-last", "--report-json", second])
            #expect(fromRun.status == 0, "\(fromRun.stderr)")
            #expect(try Rehearsal.report(second)["windowStart"] as? Int == windowEnd - 3_600_000)
        }
    }

    /// A new app, or a sandbox without traffic: the schedule's first window is the overlap before
    /// now (not an error that would fail every hourly run), and the run says how to go further back.
    @Test func sinceLastWithNoHistoryStartsTheOverlapBeforeNow() async throws {
        try await TemporaryDirectory.with { directory in
            try await TestDatabase.with { db in
                try await MockAppStore.withRunning(.init(scenario: .init(seed: 59, customers: 2))) { mock, baseURL in
                    let key = directory.file("key.p8")
                    try mock.apiKey.pemRepresentation.write(toFile: key, atomically: true, encoding: .utf8)
                    let result = try await runProcess(
                        "reconciler", ["run", "--since-last", "--overlap", "30m"],
                        environment: [
                            "DATABASE_URL": db.url, "APP_STORE_BUNDLE_ID": mock.configuration.scenario.bundleId, "APP_STORE_ENVIRONMENT": "sandbox",
                            "APP_STORE_KEY_ID": mock.configuration.keyId, "APP_STORE_ISSUER_ID": mock.configuration.issuerId,
                            "APP_STORE_PRIVATE_KEY_PATH": key, "APP_STORE_API_BASE_URL": baseURL,
                        ])
                    #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
                    #expect(result.stdout.contains("first scheduled window"), "\(result.stdout)")
                    #expect(result.stdout.contains("--start"), "\(result.stdout)")
                    #expect(
                        try await db.count(
                            "SELECT count(*) FROM reconcile_runs WHERE kind = 'scheduled' AND window_end_ms - window_start_ms = 1800000") == 1)
                }
            }
        }
    }

    func writeKey(in directory: TemporaryDirectory) throws -> String {
        let path = directory.file("key.p8")
        let pem = P256PrivateKey().pemRepresentation
        try pem.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// A key the App Store refuses: the command line, not the API client, names the settings to check.
    /// A `--max-retry-after` that is not a positive number of seconds is refused before any request.
    @Test func aRefusedKeyNamesTheSettingsToCheck() async throws {
        try await TemporaryDirectory.with { directory in
            try await MockAppStore.withRunning(.init(scenario: .init(seed: 59, customers: 2))) { mock, baseURL in
                let environment = [
                    "APP_STORE_BUNDLE_ID": mock.configuration.scenario.bundleId, "APP_STORE_ENVIRONMENT": "sandbox",
                    "APP_STORE_KEY_ID": mock.configuration.keyId,
                    "APP_STORE_ISSUER_ID": mock.configuration.issuerId, "APP_STORE_PRIVATE_KEY_PATH": try writeKey(in: directory),
                    "APP_STORE_API_BASE_URL": baseURL,
                    // No database: the test server's is not migrated, and a process that cannot join the shared budget calls no one.
                    "DATABASE_URL": "",
                ]
                let refused = try await runProcess("reconciler", ["detect-outage", "--since", "1d"], environment: environment)
                #expect(refused.status == 1)
                #expect(refused.stderr.contains("APP_STORE_KEY_ID") && refused.stderr.contains("APP_STORE_PRIVATE_KEY_PATH"), "\(refused.stderr)")
                #expect(mock.statisticsSnapshot.unauthorized == 1)

                let zero = try await runProcess("reconciler", ["detect-outage", "--since", "1d", "--max-retry-after", "0"], environment: environment)
                #expect(zero.status == 1)
                #expect(zero.stderr.contains("--max-retry-after"), "\(zero.stderr)")
                var fromEnvironment = environment
                fromEnvironment["APP_STORE_MAX_RETRY_AFTER"] = "soon"
                let garbage = try await runProcess("reconciler", ["detect-outage", "--since", "1d"], environment: fromEnvironment)
                #expect(garbage.status == 1)
                #expect(garbage.stderr.contains("APP_STORE_MAX_RETRY_AFTER"), "\(garbage.stderr)")
                #expect(mock.statisticsSnapshot.unauthorized == 1)
            }
        }
    }

    /// Apple closes the API for an hour: the run does not sleep through it (nor hold anything while
    /// waiting); it ends partial at once (exit 2), and the next run, once the API is open, resumes
    /// and recovers everything.
    @Test func aRetryAfterBeyondTheCapEndsTheRunPartialAndTheNextRunRecovers() async throws {
        try await Rehearsal.with(customers: 20, seed: 61) { rehearsal in
            try await rehearsal.setFaults(["rateLimitedRate": 1, "rateLimitedRetryAfterSeconds": 3600])
            let closed = try await rehearsal.runWindow(["--max-retry-after", "60", "--concurrency", "1", "--gap-concurrency", "1"])
            #expect(closed.status == 2, "\(closed.stdout)\n\(closed.stderr)")
            // One 429 per endpoint the run called; every later call was refused without a request.
            let requests = try await rehearsal.mockStatistics()["requests"] as? [String: Int] ?? [:]
            #expect(requests["Get Notification History"] == 1, "\(requests)")
            #expect(requests["Get Transaction History", default: 0] <= 1, "\(requests)")

            // Apple's hour is not over: a new process learns it from the database and sends nothing.
            try await rehearsal.setFaults([:])
            try await rehearsal.resetMockStatistics()
            let stillClosed = try await rehearsal.runWindow(["--max-retry-after", "60"])
            #expect(stillClosed.status == 2, "\(stillClosed.stdout)\n\(stillClosed.stderr)")
            #expect((try await rehearsal.mockStatistics()["requests"] as? [String: Int] ?? [:])["Get Notification History", default: 0] == 0)

            // The hour passes (the closures end), and the next run recovers everything.
            try await rehearsal.db.execute("UPDATE api_closures SET closed_until_ms = 0")
            let open = try await rehearsal.runWindow()
            #expect(open.status == 0, "\(open.stdout)\n\(open.stderr)")
            let export = try await rehearsal.export(), truth = try await rehearsal.truth()
            #expect(export == truth, "\(Rehearsal.difference(export, truth))")
        }
    }

    @Test func detectOutageFindsTheFailedDeliveriesAndRunDetectedRecoversThem() async throws {
        try await Rehearsal.with(customers: 60, seed: 37) { rehearsal in
            let detect = try await rehearsal.reconciler(["detect-outage", "--since", "1d", "--json"])
            #expect(detect.status == 0, "\(detect.stderr)")
            let detection = try JSONSerialization.jsonObject(with: Data(detect.stdout.utf8)) as? [String: Any] ?? [:]
            let windows = detection["windows"] as? [[String: Any]] ?? []
            #expect(windows.count == 1)
            let outageStart = Int64(ISO8601DateFormatter().date(from: rehearsal.outageStart)!.timeIntervalSince1970 * 1000)
            let window = try #require(windows.first)
            let start = try #require(window["start"] as? Int64)
            // Failures start with the outage (minus the 5-minute margin); Apple still retries them.
            #expect(abs(start - (outageStart - 5 * 60_000)) < 10 * 60_000)
            #expect((window["stillRetrying"] as? Int ?? 0) > 0)
            #expect((window["attemptsByResult"] as? [String: Int])?.isEmpty == false)
            let human = try await rehearsal.reconciler(["detect-outage", "--since", "1d"])
            #expect(human.stdout.contains("reconciler run --start"))
            #expect(human.stdout.contains("still retrying"))

            // Deliveries Apple retried after the outage reached the webhook; --detected recovers the rest.
            let recovered = try await rehearsal.reconciler(["run", "--detected", "--detect-since", "1d"])
            #expect(recovered.status == 0, "\(recovered.stdout)\n\(recovered.stderr)")
            let export = try await rehearsal.export(), truth = try await rehearsal.truth()
            #expect(export == truth, "\(Rehearsal.difference(export, truth))")
        }
    }

    @Test func checkWebhookReportsSuccessAndNamesAFailure() async throws {
        try await Rehearsal.with(customers: 5, seed: 41) { rehearsal in
            let check = try await rehearsal.reconciler(["check-webhook"])
            #expect(check.status == 0, "\(check.stdout)\n\(check.stderr)")
            #expect(check.stdout.contains("SUCCESS"))
            #expect(check.stdout.contains("stored by the webhook"))
            #expect(try await rehearsal.db.count("SELECT count(*) FROM notifications WHERE notification_type = 'TEST'") == 1)

            // Configured for another app, the TEST notification does not verify here.
            let wrongApp = try await rehearsal.reconciler(["check-webhook"], environment: ["APP_STORE_BUNDLE_ID": "com.example.other"])
            #expect(wrongApp.status != 0)

            // The webhook is down: Apple's attempt fails, and the check names what Apple recorded.
            rehearsal.serve.signal(SIGKILL)
            _ = try await rehearsal.serve.wait(timeout: .seconds(30))
            let down = try await rehearsal.reconciler(["check-webhook"])
            #expect(down.status == 2, "\(down.stdout)\n\(down.stderr)")
            #expect(
                SendAttemptResult.knownValues.contains { $0 != .success && down.stderr.contains("FAILED: \($0.rawValue)") },
                "\(down.stderr)")
        }
    }

    /// The textfile of `run --metrics-file` parses as Prometheus text (our strict reader and
    /// `promtool check metrics`), holds the run's outcome and figures and the gauges read from the
    /// database, and is the only file left in its directory; `serve` exposes the same ledger gauges.
    @Test func aRunWritesPrometheusMetricsForTheTextfileCollector() async throws {
        try await Rehearsal.with(customers: 20, seed: 43) { rehearsal in
            let directory = try TemporaryDirectory.create("textfile")
            defer { directory.remove() }
            let metrics = directory.file("reconciler.prom")
            let run = try await rehearsal.runWindow(["--metrics-file", metrics])
            #expect(run.status == 0, "\(run.stderr)")
            let text = try String(contentsOfFile: metrics, encoding: .utf8)
            let parsed = try PrometheusText(parsing: text)
            let app = ["environment": "Production", "bundle_id": "com.example.reconciler.mock"]
            #expect(parsed.families["reconciler_run_duration_seconds"]?.type == "gauge")
            #expect(parsed.value("reconciler_run_status", app.merging(["kind": "manual", "status": "succeeded"]) { $1 }) == 1)
            #expect(parsed.value("reconciler_run_status", ["kind": "manual", "status": "partial"]) == 0)
            #expect(parsed.value("reconciler_run_exit_code", ["kind": "manual"]) == 0)
            #expect(parsed.value("reconciler_quarantined_payloads_unacknowledged", app) == 0)
            let finished = try #require(parsed.value("reconciler_last_finished_run_timestamp_seconds", app))
            #expect(finished >= (parsed.value("reconciler_run_end_timestamp_seconds") ?? .infinity) - 600)
            let newestLive = try await rehearsal.db.count("SELECT max(signed_date_ms) FROM notifications WHERE source = 'webhook'")
            #expect(parsed.value("reconciler_webhook_last_notification_timestamp_seconds", app) == Double(newestLive) / 1000)
            let seen = parsed.samples("reconciler_run_notifications").reduce(0) { $0 + $1.value }
            let report = try await rehearsal.db.count(
                "SELECT (report->'notifications'->>'seen')::int FROM reconcile_runs ORDER BY run_id DESC LIMIT 1")
            #expect(seen == Double(report) && seen > 0)
            #expect((parsed.value("reconciler_run_api_requests") ?? 0) > 0)
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["reconciler.prom"])
            let promtool = try await Promtool.checkMetrics(text)
            #expect(promtool.status == 0, "promtool check metrics: \(promtool.stdout)\(promtool.stderr)")

            // serve (refreshing every second in the rehearsal) reads the same ledger gauges from the database.
            let serveMetrics = rehearsal.webhookURL.replacingOccurrences(of: "/notifications", with: "/metrics")
            let deadline = ContinuousClock.now + .seconds(60)
            var served: PrometheusText?
            while ContinuousClock.now < deadline {
                let scraped = try PrometheusText(parsing: String(decoding: try await HTTP.request(.GET, serveMetrics).body, as: UTF8.self))
                if scraped.value("reconciler_last_finished_run_timestamp_seconds", app) == finished {
                    served = scraped
                    break
                }
                try await Task.sleep(for: .milliseconds(200))
            }
            let scraped = try #require(served, "serve's /metrics never showed the finished run")
            #expect(scraped.value("reconciler_quarantined_payloads_unacknowledged", app) == 0)
            #expect((scraped.value("reconciler_webhook_last_notification_timestamp_seconds", app) ?? 0) >= Double(newestLive) / 1000)
            #expect(scraped.samples("reconciler_webhook_notifications_total").reduce(0) { $0 + $1.value } > 0)
        }
    }

    /// A run stopped by its configuration before any window still leaves its exit code for alerts.
    @Test func aRunStoppedBeforeAnyWindowWritesItsExitCode() async throws {
        try await TemporaryDirectory.with { directory in
            try await TestDatabase.with { db in
                let metrics = directory.file("stopped.prom")
                let result = try await runProcess(
                    // A lease too short to renew stops the run before its first window (a value that is no
                    // duration at all is refused while the command line is read, before any metrics exist).
                    "reconciler", ["run", "--since-last", "--lease-duration", "1s", "--metrics-file", metrics],
                    environment: [
                        "DATABASE_URL": db.url, "APP_STORE_BUNDLE_ID": "com.example", "APP_STORE_ENVIRONMENT": "sandbox",
                        "APP_STORE_KEY_ID": "K", "APP_STORE_ISSUER_ID": "I", "APP_STORE_PRIVATE_KEY_PATH": try writeKey(in: directory),
                        "APP_STORE_API_BASE_URL": "http://127.0.0.1:9",
                    ])
                #expect(result.status == 1, "\(result.stderr)")
                let parsed = try PrometheusText(parsing: try String(contentsOfFile: metrics, encoding: .utf8))
                #expect(parsed.value("reconciler_run_exit_code", ["kind": "scheduled", "environment": "Sandbox", "bundle_id": "com.example"]) == 1)
                #expect(parsed.samples("reconciler_run_status").isEmpty)

                let bad = try await runProcess("reconciler", ["run", "--since-last", "--metrics-file", "/no/such/directory/reconciler.prom"])
                #expect(bad.status == 1)
                #expect(bad.stderr.contains("--metrics-file"), "\(bad.stderr)")
            }
        }
    }

    /// Every `sh` block of jobs/RUNBOOK.md, run as written against the rehearsal's outage.
    @Test func theRunbooksCommandsWorkAsWritten() async throws {
        let runbook = try String(contentsOf: Repository.root.appendingPathComponent("jobs/RUNBOOK.md"), encoding: .utf8)
        var commands: [String] = []
        var inBlock = false
        for line in runbook.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("```") {
                inBlock = line == "```sh"
                continue
            }
            if inBlock, !line.trimmingCharacters(in: .whitespaces).isEmpty { commands.append(String(line)) }
        }
        #expect(commands.count >= 8)
        try await Rehearsal.with(customers: 40, seed: 47) { rehearsal in
            var environment = rehearsal.environment
            environment["START"] = rehearsal.outageStart
            environment["END"] = rehearsal.outageEnd
            // The support ticket's order ID (from the customer's receipt email).
            environment["ORDER_ID"] = try #require(try await RepairTests.orders(rehearsal).last { $0.forged != true }).orderId
            // A consumption request the webhook stored (the transaction `consumption list` shows), and the app's webhook.
            let requests = try await rehearsal.reconciler(["consumption", "list", "--json"])
            let listed = try JSONSerialization.jsonObject(with: Data(requests.stdout.utf8)) as? [[String: Any]] ?? []
            environment["TRANSACTION_ID"] = try #require(listed.first?["transactionId"] as? String, "\(requests.stdout) \(requests.stderr)")
            environment["PATH"] = Executables.directory.path + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
            // The app's own webhook, signed, as a deployment that forwards configures it.
            // `consumption respond` answers by the policy the runbook says to put in the configuration file.
            let policy = try rehearsal.configurationFile("policy") {
                $0 + "\nconsumption: {customerConsented: true, deliveryStatus: DELIVERED, sampleContentProvided: false, refundPreference: DECLINE}\n"
            }
            try await AppWebhookReceiver.withRunning(.init(secret: "runbook-secret")) { receiver, url in
                environment["RECONCILER_FORWARD_TO"] = url
                environment["RECONCILER_FORWARD_SECRET"] = "runbook-secret"
                for command in commands {
                    // The files the runbook writes to /tmp go to the rehearsal's directory, removed with it.
                    let command = command.replacingOccurrences(of: "/tmp/", with: rehearsal.directory.path + "/")
                    var environment = environment
                    if command.contains("consumption respond") { environment["RECONCILER_CONFIG"] = policy }
                    let result = try await runProcess("/bin/bash", ["-c", command], environment: environment)
                    #expect(result.status == 0, "`\(command)` exited \(result.status): \(result.stderr.suffix(1500))")
                }
                #expect(receiver.statistics.badSignatures == 0)
            }
            let export = try await rehearsal.export(), truth = try await rehearsal.truth()
            #expect(export == truth, "\(Rehearsal.difference(export, truth))")
        }
    }
}
