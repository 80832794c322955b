import AppStoreServer
import Foundation
import MockAppStore
import NIOHTTP1
import PostgresNIO
import ReconcilerShared
import TestSupport
import Testing

/// Consumption requests through real processes: an outage of 16 hours (the webhook down until a
/// minute ago) with consumption requests in it, some older than Apple's 12 hours, recovered by
/// `reconciler run` with forwarding; then `reconciler consumption list` and `consumption send`
/// against the mock's Send Consumption Information.
@Suite struct ConsumptionRequestsTests {
    static let twelveHours: Int64 = 12 * 3_600_000

    /// The outage's consumption requests Apple never delivered: what the run must recover.
    static func outageRequests(_ rehearsal: Rehearsal) async throws -> [MockAppStore.NotificationLine] {
        let formatter = ISO8601DateFormatter()
        let start = try #require(formatter.date(from: rehearsal.outageStart)).timeIntervalSince1970 * 1000
        let end = try #require(formatter.date(from: rehearsal.outageEnd)).timeIntervalSince1970 * 1000
        return try await rehearsal.mockNotifications().filter {
            $0.notificationType == "CONSUMPTION_REQUEST" && !$0.delivered && Double($0.firstAttemptDate) >= start && Double($0.firstAttemptDate) < end
        }
    }

    /// The run's report lists each recovered request with its deadline (the first send attempt +
    /// 12 hours) and whether it had passed when the report was made; the requests never change the
    /// exit code; the app's webhook hears of the open ones before any other notification of the
    /// run; the metrics and the incident page say the same.
    @Test func aRunReportsTheRequestsWithTheirDeadlinesAndForwardsTheOpenOnesFirst() async throws {
        try await AppWebhookReceiver.withRunning(.init()) { receiver, receiverURL in
            try await Rehearsal.with(customers: 30, seed: 211, outageHoursAgo: (16, 0.02)) { rehearsal in
                let requests = try await Self.outageRequests(rehearsal)
                let (reportPath, metricsPath, pagePath) = (rehearsal.file("report.json"), rehearsal.file("run.prom"), rehearsal.file("run.html"))
                let run = try await rehearsal.reconciler(
                    [
                        "run", "--start", rehearsal.outageStart, "--end", rehearsal.outageEnd,
                        "--forward-to", receiverURL, "--forward-unsigned", "--forward-drain-timeout", "120s", "--report-json", reportPath,
                        "--metrics-file", metricsPath,
                        "--report-html", pagePath,
                    ], environment: ["LOG_LEVEL": "info"])
                #expect(run.status == 0, "\(run.stdout)\n\(run.stderr)")
                // The run held its other deliveries while it queried the consumption requests, then let them go.
                #expect(run.stderr.contains("the consumption requests are queried"), "\(run.stderr)")
                #expect(try await rehearsal.db.count("SELECT count(*) FROM forward_queue WHERE held") == 0)

                let report = try Rehearsal.report(reportPath)
                let finishedAt = try #require(ISO8601DateFormatter().date(from: report["finishedAt"] as? String ?? ""))
                let reportedAt = Int64(finishedAt.timeIntervalSince1970 * 1000)
                let listed = try #require(report["consumptionRequests"] as? [[String: Any]])
                #expect(Set(listed.compactMap { $0["notificationUUID"] as? String }) == Set(requests.map(\.notificationUUID)))
                let open = requests.filter { $0.firstAttemptDate + Self.twelveHours > reportedAt }
                let expired = requests.filter { $0.firstAttemptDate + Self.twelveHours <= reportedAt }
                #expect(!open.isEmpty && !expired.isEmpty, "the outage must hold open and expired requests: \(requests)")
                for request in requests {
                    let entry = try #require(listed.first { $0["notificationUUID"] as? String == request.notificationUUID })
                    #expect(entry["firstSentAt"] as? Int64 == request.firstAttemptDate)
                    #expect(entry["respondBy"] as? Int64 == request.firstAttemptDate + Self.twelveHours)
                    #expect(entry["expired"] as? Bool == (request.firstAttemptDate + Self.twelveHours <= reportedAt))
                    #expect(entry["answered"] as? Bool == false && entry["transactionId"] is String && entry["originalTransactionId"] is String)
                }
                #expect(report["consumptionRequestsOpen"] as? Int == open.count)
                #expect(report["consumptionRequestsExpired"] as? Int == expired.count)
                #expect(
                    run.stdout.contains("consumption  \(requests.count) consumption requests recovered: \(open.count) open, \(expired.count) expired")
                )

                // The app's webhook heard of the open requests before any other notification of the run.
                let arrivals = receiver.statistics.arrivals
                #expect(Set(arrivals.prefix(open.count)) == Set(open.map(\.notificationUUID)), "\(arrivals.prefix(open.count + 3))")
                #expect(Set(arrivals).isSuperset(of: requests.map(\.notificationUUID)))
                #expect(arrivals.count > requests.count)

                let metrics = try PrometheusText(parsing: try String(contentsOfFile: metricsPath, encoding: .utf8))
                #expect(metrics.value("reconciler_run_consumption_requests", ["state": "expired"]) == Double(expired.count))
                #expect(metrics.value("reconciler_run_consumption_requests", ["state": "open"]) == Double(open.count))
                let openGauges = ["under_2h", "2h_to_6h", "over_6h"].compactMap {
                    metrics.value("reconciler_consumption_requests_open", ["time_left": $0])
                }
                // The live webhook's requests still open count too (they are the app's to answer as well).
                #expect(openGauges.reduce(0, +) >= Double(open.count))
                let soonest = try #require(metrics.value("reconciler_consumption_request_next_deadline_timestamp_seconds"))
                #expect(soonest * 1000 <= Double(open.map { $0.firstAttemptDate + Self.twelveHours }.min() ?? 0) + 1)

                let page = try String(contentsOfFile: pagePath, encoding: .utf8)
                #expect(
                    page.contains("id=\"consumption-section\"") && page.contains("data-open=\"\(open.count)\"")
                        && page.contains("data-expired=\"\(expired.count)\""))
                #expect(requests.allSatisfy { page.contains(Timestamp(millisecondsSince1970: $0.firstAttemptDate + Self.twelveHours).description) })
            }
        }
    }

    /// `consumption list` shows every stored request with its deadline; `consumption send` refuses
    /// answers Apple's rules refuse before any request (exit 1, nothing sent or stored), reaches the
    /// mock with the fields given and records the answer (the request is answered), shows Apple's
    /// code for an Apple 4xx (exit 1) and exits 2 when the App Store fails (5xx).
    @Test func listAndSendAnAnswerWithApplesRules() async throws {
        try await Rehearsal.with(customers: 30, seed: 212, outageHoursAgo: (16, 0.02)) { rehearsal in
            let run = try await rehearsal.runWindow()
            #expect(run.status == 0, "\(run.stderr)")
            // The export's new fields equal the mock's truth, line by line (a refund, prorated or
            // not, and Apple's identifier of each customer among them).
            let export = try await rehearsal.export(), truth = try await rehearsal.truth()
            #expect(export == truth, "\(Rehearsal.difference(export, truth))")
            #expect(export.contains(#""revocationType":"REFUND_FULL""#) && !export.contains(#""appTransactionId":null"#))
            let listed = try await rehearsal.reconciler(["consumption", "list", "--json"])
            #expect(listed.status == 0, "\(listed.stderr)")
            let entries = try #require(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]])
            let stored = try await rehearsal.db.count("SELECT count(*) FROM notifications WHERE notification_type = 'CONSUMPTION_REQUEST'")
            #expect(entries.count == stored && stored > 0)
            #expect(entries.allSatisfy { ["open", "expired"].contains($0["state"] as? String) && $0["respondBy"] is Int64 })
            let table = try await rehearsal.reconciler(["consumption", "list", "--open"])
            #expect(table.stdout.contains("RESPOND BY") && table.stdout.contains(" left"), "\(table.stdout)")

            // An open request of a consumable, and one of a subscription.
            func transaction(of type: String) async throws -> String {
                try #require(
                    try await rehearsal.db.strings(
                        """
                        SELECT n.transaction_id FROM notifications n JOIN transactions t USING (bundle_id, environment, transaction_id)
                        WHERE n.respond_by_ms > (extract(epoch FROM now()) * 1000)::bigint AND t.product_type = \(type)
                        ORDER BY n.respond_by_ms LIMIT 1
                        """
                    ).first)
            }
            let coins = try await transaction(of: "Consumable")
            let subscription = try await transaction(of: "Auto-Renewable Subscription")
            let answer = ["consumption", "send", "--customer-consented", "--delivery-status", "DELIVERED", "--sample-content-provided", "false"]

            try await rehearsal.resetMockStatistics()
            for (arguments, why) in [
                (
                    ["consumption", "send", "--transaction-id", coins, "--delivery-status", "DELIVERED", "--sample-content-provided", "false"],
                    "consent"
                ),
                (answer + ["--transaction-id", coins, "--delivery-status", "SHIPPED"], "InvalidDeliveryStatus"),
                (answer + ["--transaction-id", coins, "--consumption-percentage", "100001"], "percentage"),
                (answer + ["--transaction-id", coins, "--refund-preference", "GRANT_PRORATED"], "GRANT_PRORATED"),
                (answer + ["--transaction-id", subscription, "--consumption-percentage", "50000"], "4000209"),
                (answer + ["--transaction-id", "2000999999999999"], "no CONSUMPTION_REQUEST"),
            ] {
                let refused = try await rehearsal.reconciler(arguments)
                #expect(refused.status == 1, "\(arguments): \(refused.stdout)\(refused.stderr)")
                #expect(refused.stderr.contains(why), "\(refused.stderr)")
            }
            let untouched = try await rehearsal.mockStatistics()
            #expect((untouched["requests"] as? [String: Int])?["Send Consumption Information"] == nil, "a refused answer reached the App Store")
            #expect(try await rehearsal.db.count("SELECT count(*) FROM consumption_answers") == 0)

            let sent = try await rehearsal.reconciler(
                answer + ["--transaction-id", coins, "--refund-preference", "GRANT_PRORATED", "--consumption-percentage", "25000"])
            #expect(sent.status == 0, "\(sent.stderr)")
            #expect(sent.stdout.contains("accepted: Apple received the consumption information for transaction \(coins)"))
            let received = String(decoding: try await HTTP.request(.GET, "\(rehearsal.mockURL)/mock/consumption").body, as: UTF8.self)
                .split(separator: "\n").map { try? JSONDecoder().decode(MockAppStore.ReceivedConsumptionAnswer.self, from: Data($0.utf8)) }
            let delivered = try #require(received.first ?? nil)
            #expect(received.count == 1 && delivered.transactionId == coins && delivered.deliveryStatus == "DELIVERED")
            #expect(!delivered.sampleContentProvided && delivered.refundPreference == "GRANT_PRORATED" && delivered.consumptionPercentage == 25_000)
            let afterwards = try JSONSerialization.jsonObject(
                with: Data(try await rehearsal.reconciler(["consumption", "list", "--json"]).stdout.utf8))
            let answered = (afterwards as? [[String: Any]] ?? []).filter { $0["state"] as? String == "answered" }
            #expect(answered.map { $0["transactionId"] as? String } == [coins])
            let open = try await rehearsal.reconciler(["consumption", "list", "--open", "--json"])
            #expect(!open.stdout.contains("\"\(coins)\""))

            // Apple refuses what the reconciler cannot check: the stored transaction gone, the
            // subscription's percentage reaches Apple, which answers 4000209; exit 1, recorded refused.
            try await rehearsal.db.execute("DELETE FROM transactions WHERE transaction_id = \(subscription)")
            let refused = try await rehearsal.reconciler(answer + ["--transaction-id", subscription, "--consumption-percentage", "50000"])
            #expect(refused.status == 1, "\(refused.stderr)")
            #expect(refused.stderr.contains("errorCode 4000209 ConsumptionPercentageAutoRenewableSubscriptionError"), "\(refused.stderr)")
            // The App Store failing: exit 2, send it again.
            try await rehearsal.setFaults(["serverErrorRate": 1.0])
            let failing = try await rehearsal.reconciler(answer + ["--transaction-id", subscription])
            #expect(failing.status == 2, "\(failing.stderr)")
            #expect(failing.stderr.contains("5000001"), "\(failing.stderr)")
            try await rehearsal.setFaults([:])
            #expect(
                try await rehearsal.db.strings("SELECT outcome FROM consumption_answers ORDER BY answer_id") == ["accepted", "refused", "failed"])
        }
    }
    /// The open request the live webhook received with the latest deadline, and the open one a run
    /// recovered with the latest deadline (the furthest from expiring while the test runs).
    static func openRequest(live: Bool, in rehearsal: Rehearsal) async throws -> String {
        try #require(
            try await rehearsal.db.strings(
                """
                SELECT transaction_id FROM notifications
                WHERE respond_by_ms > (extract(epoch FROM now()) * 1000)::bigint + 3600000 AND (source = 'webhook') = \(live)
                ORDER BY respond_by_ms DESC LIMIT 1
                """
            ).first, "no open \(live ? "live" : "recovered") request")
    }

    static func list(_ rehearsal: Rehearsal, _ extra: [String] = [], environment: [String: String] = [:]) async throws -> [[String: Any]] {
        let listed = try await rehearsal.reconciler(["consumption", "list", "--json"] + extra, environment: environment)
        #expect(listed.status == 0, "\(listed.stderr)")
        return try #require(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]])
    }

    /// `consumption ack` (the app answered a request itself): exit 0, the request acked by $USER
    /// with the note and out of `list --open`; acked again, the first ack is kept (exit 0); an
    /// unknown or malformed transaction is exit 1. With `RECONCILER_CONSUMPTION_LIVE_REQUESTS=ignore`
    /// the requests the live webhook received leave `list --open` and the open gauge a run writes.
    @Test func anAckedRequestLeavesTheOpenRequestsAndLiveOnesCanBeLeftToTheApp() async throws {
        try await Rehearsal.with(customers: 60, seed: 213, mockArguments: ["--span", "20h"], outageHoursAgo: (14, 8)) { rehearsal in
            let run = try await rehearsal.runWindow()
            #expect(run.status == 0, "\(run.stderr)")
            let live = try await Self.openRequest(live: true, in: rehearsal)
            let recovered = try await Self.openRequest(live: false, in: rehearsal)

            let acked = try await rehearsal.reconciler(
                ["consumption", "ack", "--transaction-id", live, "--note", "answered by the app"], environment: ["USER": "alice"])
            #expect(acked.status == 0, "\(acked.stdout)\(acked.stderr)")
            #expect(acked.stdout.contains("acked: the consumption request for transaction \(live)"), "\(acked.stdout)")
            let entries = try await Self.list(rehearsal)
            for key in ["ackedAt", "ackedBy", "ackNote", "answeredBy", "answeredAt", "state"] {
                #expect(entries.allSatisfy { $0.keys.contains(key) }, "\(key)")
            }
            let entry = try #require(entries.first { $0["transactionId"] as? String == live })
            #expect(entry["state"] as? String == "acked" && entry["ackedBy"] as? String == "alice")
            #expect(entry["ackNote"] as? String == "answered by the app" && entry["ackedAt"] is Int64 && entry["answeredBy"] is NSNull)
            #expect(entries.filter { $0["state"] as? String == "acked" }.count == 1)
            let open = try await Self.list(rehearsal, ["--open"])
            #expect(!open.contains { $0["transactionId"] as? String == live } && open.contains { $0["transactionId"] as? String == recovered })
            let table = try await rehearsal.reconciler(["consumption", "list"])
            #expect(table.stdout.split(separator: "\n").contains { $0.hasPrefix(live) && $0.contains(" acked ") }, "\(table.stdout)")

            // Again, by someone else: exit 0, the first ack kept.
            let again = try await rehearsal.reconciler(["consumption", "ack", "--transaction-id", live, "--by", "bob"])
            #expect(
                again.status == 0 && again.stdout.contains("already acked") && again.stdout.contains("by alice"), "\(again.stdout)\(again.stderr)")
            #expect(try await Self.list(rehearsal).first { $0["transactionId"] as? String == live }?["ackedBy"] as? String == "alice")
            for (id, why) in [("2000999999999999", "no CONSUMPTION_REQUEST"), ("20009x", "not a transaction ID")] {
                let refused = try await rehearsal.reconciler(["consumption", "ack", "--transaction-id", id])
                #expect(refused.status == 1 && refused.stderr.contains(why), "\(id): \(refused.stderr)")
            }
            #expect(try await rehearsal.db.count("SELECT count(*) FROM consumption_acks") == 1)

            // Live requests left to the app: only those a run recovered are open.
            let ignore = ["RECONCILER_CONSUMPTION_LIVE_REQUESTS": "ignore"]
            let recoveredOnly = try await Self.list(rehearsal, ["--open"], environment: ignore)
            #expect(recoveredOnly.contains { $0["transactionId"] as? String == recovered })
            #expect(recoveredOnly.allSatisfy { $0["runId"] is Int64 }, "\(recoveredOnly)")
            #expect(try await Self.list(rehearsal, ["--open"]).contains { $0["runId"] is NSNull }, "no open live request to leave out")
            let wrong = try await rehearsal.reconciler(
                ["consumption", "list", "--open"], environment: ["RECONCILER_CONSUMPTION_LIVE_REQUESTS": "sometimes"])
            #expect(wrong.status == 1 && wrong.stderr.contains("RECONCILER_CONSUMPTION_LIVE_REQUESTS"), "\(wrong.stderr)")
            // Every recovered request acked: with live ones ignored, the gauge a run writes counts none.
            try await rehearsal.db.execute(
                """
                INSERT INTO consumption_acks (notification_uuid, bundle_id, environment, transaction_id, acked_by)
                SELECT notification_uuid, bundle_id, environment, transaction_id, 'test' FROM notifications
                WHERE respond_by_ms IS NOT NULL AND source = 'history' ON CONFLICT DO NOTHING
                """)
            for (environment, anyOpen) in [(ignore, false), ([:], true)] {
                let metricsPath = rehearsal.file("ack-\(anyOpen).prom")
                let again = try await rehearsal.reconciler(
                    ["run", "--start", rehearsal.outageStart, "--end", rehearsal.outageEnd, "--metrics-file", metricsPath], environment: environment)
                #expect(again.status == 0, "\(again.stderr)")
                let metrics = try PrometheusText(parsing: try String(contentsOfFile: metricsPath, encoding: .utf8))
                let counted = ["under_2h", "2h_to_6h", "over_6h"].compactMap {
                    metrics.value("reconciler_consumption_requests_open", ["time_left": $0])
                }
                #expect((counted.reduce(0, +) > 0) == anyOpen, "\(environment): \(counted)")
                #expect((metrics.value("reconciler_consumption_request_next_deadline_timestamp_seconds") ?? 0 > 0) == anyOpen)
            }
        }
    }

    /// `consumption send` writes the answer `sending` before Apple is called and completes it
    /// after; when the completion cannot be written it says Apple accepted it and exits 4 (not "send
    /// it again"), and the request takes no other answer unless `--again`; neither does one answered
    /// or acked. An answer Apple failed (5xx) leaves the request open to the next.
    @Test func anAcceptedAnswerTheDatabaseCouldNotRecordIsNotSentAgainByMistake() async throws {
        try await Rehearsal.with(customers: 30, seed: 214, outageHoursAgo: (16, 0.02)) { rehearsal in
            let run = try await rehearsal.runWindow()
            #expect(run.status == 0, "\(run.stderr)")
            let open = try await rehearsal.db.strings(
                """
                SELECT transaction_id FROM notifications
                WHERE respond_by_ms > (extract(epoch FROM now()) * 1000)::bigint + 3600000
                ORDER BY respond_by_ms DESC LIMIT 3
                """)
            try #require(open.count == 3, "three open requests: \(open)")
            let (unrecorded, answered, failing) = (open[0], open[1], open[2])
            let answer = ["consumption", "send", "--customer-consented", "--delivery-status", "DELIVERED", "--sample-content-provided", "false"]
            func received() async throws -> [MockAppStore.ReceivedConsumptionAnswer] {
                String(decoding: try await HTTP.request(.GET, "\(rehearsal.mockURL)/mock/consumption").body, as: UTF8.self)
                    .split(separator: "\n").compactMap { try? JSONDecoder().decode(MockAppStore.ReceivedConsumptionAnswer.self, from: Data($0.utf8)) }
            }
            func outcomes(_ id: String) async throws -> [String] {
                try await rehearsal.db.strings("SELECT outcome FROM consumption_answers WHERE transaction_id = \(id) ORDER BY answer_id")
            }

            // The database refuses to record an accepted answer (as a full disk or a lost server would).
            try await rehearsal.db.execute(
                """
                CREATE FUNCTION refuse_accepted() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN RAISE EXCEPTION 'could not extend file: No space left on device'; END $$
                """)
            try await rehearsal.db.execute(
                """
                CREATE TRIGGER refuse_accepted BEFORE INSERT OR UPDATE ON consumption_answers
                FOR EACH ROW WHEN (NEW.outcome = 'accepted') EXECUTE FUNCTION refuse_accepted()
                """)
            let lost = try await rehearsal.reconciler(answer + ["--transaction-id", unrecorded])
            #expect(lost.status == 4, "\(lost.stdout)\(lost.stderr)")
            #expect(lost.stderr.contains("Apple accepted") && lost.stderr.contains("do not send it again"), "\(lost.stderr)")
            #expect(try await received().map(\.transactionId) == [unrecorded])
            // Written before Apple was called: the row is there, `sending`, from before the mock received it.
            #expect(try await outcomes(unrecorded) == ["sending"])
            let written = try await rehearsal.db.count(
                "SELECT (extract(epoch FROM sent_at) * 1000)::bigint FROM consumption_answers WHERE transaction_id = \(unrecorded)")
            let arrived = try #require(try await received().first?.receivedAt)
            #expect(Int64(written) <= arrived)
            try await rehearsal.db.execute("DROP TRIGGER refuse_accepted ON consumption_answers")

            // Sent again by mistake: refused, nothing reaches Apple; acked instead.
            let twice = try await rehearsal.reconciler(answer + ["--transaction-id", unrecorded])
            #expect(twice.status == 1 && twice.stderr.contains("being sent") && twice.stderr.contains("--again"), "\(twice.stderr)")
            #expect(try await received().count == 1)
            let ack = try await rehearsal.reconciler(
                ["consumption", "ack", "--transaction-id", unrecorded, "--note", "accepted by Apple, not recorded"])
            #expect(ack.status == 0, "\(ack.stderr)")
            let acked = try await rehearsal.reconciler(answer + ["--transaction-id", unrecorded])
            #expect(acked.status == 1 && acked.stderr.contains("acked"), "\(acked.stderr)")

            // Answered: refused unless --again.
            let sent = try await rehearsal.reconciler(answer + ["--transaction-id", answered])
            #expect(sent.status == 0, "\(sent.stderr)")
            #expect(try await outcomes(answered) == ["accepted"])
            let repeated = try await rehearsal.reconciler(answer + ["--transaction-id", answered])
            #expect(repeated.status == 1 && repeated.stderr.contains("was answered") && repeated.stderr.contains("--again"), "\(repeated.stderr)")
            #expect(try await received().count == 2)
            let deliberate = try await rehearsal.reconciler(answer + ["--transaction-id", answered, "--again"])
            #expect(deliberate.status == 0, "\(deliberate.stderr)")
            #expect(try await received().map(\.transactionId) == [unrecorded, answered, answered])
            #expect(try await outcomes(answered) == ["accepted", "accepted"])
            let listed = try await Self.list(rehearsal).first { $0["transactionId"] as? String == answered }
            #expect(listed?["state"] as? String == "answered" && listed?["answeredBy"] as? String == "command")

            // The App Store failing: exit 2, and the next answer needs no --again.
            try await rehearsal.setFaults(["serverErrorRate": 1.0])
            let failed = try await rehearsal.reconciler(answer + ["--transaction-id", failing])
            #expect(failed.status == 2 && failed.stderr.contains("send it again"), "\(failed.stderr)")
            try await rehearsal.setFaults([:])
            let retried = try await rehearsal.reconciler(answer + ["--transaction-id", failing])
            #expect(retried.status == 0, "\(retried.stderr)")
            #expect(try await outcomes(failing) == ["failed", "accepted"])
        }
    }

    /// With `automatic: true`, `serve`'s leader answers by the policy the recovered requests whose
    /// `answerAfter` passed and whose deadline has not, each once, with the key of the app's entry;
    /// those still inside their `answerAfter` wait. The rehearsal's serve, stopped, gave the lease up.
    @Test func serveAnswersTheDueRequestsByAnAutomaticPolicy() async throws {
        try await Rehearsal.with(customers: 30, seed: 211, configurationFile: true, outageHoursAgo: (16, 0.02)) { rehearsal in
            let run = try await rehearsal.runWindow()
            #expect(run.status == 0, "\(run.stdout)\n\(run.stderr)")
            let listed =
                try JSONSerialization.jsonObject(
                    with: Data(try await rehearsal.reconciler(["consumption", "list", "--json"]).stdout.utf8)) as? [[String: Any]] ?? []
            let automatic =
                "\nconsumption: {customerConsented: true, deliveryStatus: DELIVERED, sampleContentProvided: false, "
                + "refundPreference: DECLINE, answerAfter: 2h, automatic: true}\n"
            let policy = try rehearsal.configurationFile("automatic") { $0 + automatic }
            rehearsal.serve.signal(SIGTERM)
            _ = try await rehearsal.serve.wait()
            // A serve that cannot read the app's key (the deploy examples mount none into serve)
            // serves all the same and says once that the runs answer instead.
            let keyless = try rehearsal.configurationFile("keyless") {
                $0.replacingOccurrences(of: #"privateKeyPath: .*"#, with: "privateKeyPath: /no/such/AuthKey.p8", options: .regularExpression)
                    + automatic
            }
            let withoutKey = try RunningProcess(
                "reconciler", ["serve", "--port", "\(freePort())", "--host", "127.0.0.1", "--config", keyless],
                environment: rehearsal.environment.merging(["LOG_LEVEL": "info"]) { $1 })
            defer { withoutKey.kill() }
            try await withoutKey.waitForOutput(containing: "each run answers its due requests instead")
            try await withoutKey.waitForOutput(containing: "listening")
            withoutKey.signal(SIGTERM)
            #expect(try await withoutKey.wait().status == 0)
            let serve = try rehearsal.start([
                "serve", "--port", "\(freePort())", "--host", "127.0.0.1", "--config", policy, "--leader-interval", "1s",
            ])
            defer { serve.kill() }

            // Due: asked more than 2 h ago, deadline ahead (a margin of 5 minutes either side of
            // both, for the time the test takes).
            let now = Int64(Date().timeIntervalSince1970 * 1000), margin: Int64 = 300_000, twoHours: Int64 = 7_200_000
            func asked(_ entry: [String: Any]) -> Int64 { entry["firstSentAt"] as? Int64 ?? entry["signedDate"] as? Int64 ?? 0 }
            func deadline(_ entry: [String: Any]) -> Int64 { entry["respondBy"] as? Int64 ?? 0 }
            let open = listed.filter { ($0["state"] as? String) == "open" }
            let due = Set(
                open.filter { asked($0) + twoHours < now - margin && deadline($0) > now + margin }.compactMap { $0["transactionId"] as? String })
            let waiting = Set(open.filter { asked($0) + twoHours > now + margin }.compactMap { $0["transactionId"] as? String })
            try #require(!due.isEmpty && !waiting.isEmpty, "the outage must leave due and waiting requests: \(open)")
            func received() async throws -> [String] {
                String(decoding: try await HTTP.request(.GET, "\(rehearsal.mockURL)/mock/consumption").body, as: UTF8.self)
                    .split(separator: "\n").compactMap { try? JSONDecoder().decode(MockAppStore.ReceivedConsumptionAnswer.self, from: Data($0.utf8)) }
                    .map(\.transactionId)
            }
            try await eventually("serve's leader answered the due requests") { Set(try await received()).isSuperset(of: due) }
            let answers = try await received()
            #expect(answers.count == Set(answers).count, "a request answered twice: \(answers)")
            #expect(Set(answers).isDisjoint(with: waiting), "answered before its answerAfter: \(Set(answers).intersection(waiting))")
            #expect(try await rehearsal.db.strings("SELECT DISTINCT answered_by FROM consumption_answers") == ["policy"])
            #expect(try await rehearsal.db.strings("SELECT holder FROM serve_leases").count == 1)
        }
    }
}
