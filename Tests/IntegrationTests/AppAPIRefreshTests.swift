import AppStoreServer
import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import MockAppStore
import NIOHTTP1
import PostgresNIO
import ReconcilerDomain
import ReconcilerMetrics
import ReconcilerShared
import TestSupport
import Testing
import WebhookServer

@testable import Reconciler
@testable import ReconcilerStore

/// The app API's refreshes (`refresh=if-stale|always` on `GET /v1/purchases`) and the app's
/// consumption answers (`POST /v1/consumption/{transactionId}`) against a real PostgreSQL and the
/// mock over HTTP; the answer's deadline is judged on a ``ManualClock`` the tests move.
@Suite struct AppAPIRefreshTests {
    /// Runs `body` with the app API of the mock's first app, whose refresher calls the mock at `baseURL`.
    static func withAPI(
        _ db: TestDatabase, mock: MockAppStore, baseURL: String, clock: ManualClock, budget: RequestBudget? = nil, refreshRateLimit: Double? = nil,
        retryPolicy: AppStoreServerAPIClient.RetryPolicy = .init(),
        _ body: @Sendable (AppAPITests.Client, AppRefresher) async throws -> Void
    ) async throws {
        try await TemporaryDirectory.with { directory in
            let tokenFile = directory.file("app-api-tokens")
            try "\(AppAPITests.token)\n".write(toFile: tokenFile, atomically: true, encoding: .utf8)
            let verifier = try mock.verifier()
            let scope = AppScope(target: verifier.configuration.target, entitlement: .init())
            let budget = budget ?? RequestBudget(environment: scope.target.environment)
            let refresher = AppRefresher(
                configuration: .init(clock: clock, refreshRateLimit: refreshRateLimit), scope: scope, database: db.database, verifier: verifier,
                client: mock.client(baseURL: baseURL, retryPolicy: retryPolicy), origins: ConsumptionPolicyTests.origins, budget: budget)
            let server = AppAPIServer(
                configuration: .init(), tokens: try AppAPITokens(path: tokenFile, logger: TestDatabase.logger),
                handlers: [NotificationHandler(scope: scope, verifier: verifier, database: db.database)], refreshers: [refresher],
                database: db.database, metrics: MetricsRegistry(bundleId: nil, environment: nil), logger: TestDatabase.logger)
            do {
                try await server.makeApplication().test(.router) { client in try await body(AppAPITests.Client(client: client), refresher) }
            } catch {
                await refresher.stop()
                throw error
            }
            await refresher.stop()
        }
    }

    static func base(_ mock: MockAppStore) -> String {
        "/v1/purchases?bundleId=\(mock.configuration.scenario.bundleId)&environment=production"
    }

    /// The originals of the mock's first app, in the order of their first notification.
    static func originals(_ mock: MockAppStore) -> [String] {
        var seen: [String] = []
        for sent in mock.sentNotifications {
            if let id = sent.notification.originalTransactionId, !seen.contains(id) { seen.append(id) }
        }
        return seen
    }

    @Test func refreshAlwaysShowsARefundTheWebhookMissed() async throws {
        try await TestDatabase.with { db in
            try await MockAppStore.withRunning(.init(scenario: .init(seed: 36, customers: 6))) { mock, baseURL in
                try await Self.withAPI(db, mock: mock, baseURL: baseURL, clock: ManualClock()) { api, _ in
                    // A purchase Apple has and the store does not: refresh=if-stale looks it up at Apple.
                    var chosen: [String: Any]?
                    for original in Self.originals(mock) {
                        let reply = try await api.get("\(Self.base(mock))&originalTransactionId=\(original)&refresh=if-stale&timeout=30s")
                        #expect(reply.status == 200, "\(reply.text)")
                        if let purchase = reply.purchases.first, purchase["revocationDate"] is NSNull, purchase["latestTransactionId"] is String {
                            #expect(purchase["fresh"] as? Bool == true)
                            #expect(purchase["checkedAt"] is NSNumber)
                            chosen = purchase
                            break
                        }
                    }
                    let purchase = try #require(chosen)
                    let original = try #require(purchase["originalTransactionId"] as? String)
                    let latest = try #require(purchase["latestTransactionId"] as? String)

                    // The customer is refunded; the mock has no webhook: the REFUND notification never arrives.
                    let refunded = try await HTTP.request(.POST, "\(baseURL)/mock/refund?transactionId=\(latest)")
                    #expect(refunded.status == 200, "\(String(decoding: refunded.body, as: UTF8.self))")
                    let stored = try await api.get("\(Self.base(mock))&originalTransactionId=\(original)")
                    #expect(stored.purchases.first?["revocationDate"] is NSNull)
                    #expect(stored.purchases.first?["fresh"] as? Bool == false)
                    // Checked a moment ago: if-stale with a minute's maxAge does not ask Apple again.
                    let recent = try await api.get("\(Self.base(mock))&originalTransactionId=\(original)&refresh=if-stale&maxAge=10m")
                    #expect(recent.purchases.first?["revocationDate"] is NSNull)
                    #expect(recent.purchases.first?["fresh"] as? Bool == false)

                    let fresh = try await api.get("\(Self.base(mock))&transactionId=\(latest)&refresh=always&timeout=30s")
                    #expect(fresh.status == 200, "\(fresh.text)")
                    #expect(fresh.purchases.count == 1)
                    #expect(fresh.purchases.first?["revocationDate"] is NSNumber, "\(fresh.text)")
                    #expect(fresh.purchases.first?["fresh"] as? Bool == true)
                    // Applied through the verified path of a run's phase 2, with its change-feed row (no run: a refresh is not one).
                    #expect(
                        try await db.count(
                            "SELECT count(*) FROM purchases WHERE original_transaction_id = \(original) AND revocation_date_ms IS NOT NULL") == 1)
                    #expect(
                        try await db.count(
                            """
                            SELECT count(*) FROM purchase_changes WHERE original_transaction_id = \(original) AND run_id IS NULL
                                AND source IN ('transaction_history', 'status_refresh') AND after_state->>'revocationDate' IS NOT NULL
                            """) == 1)

                    // An app account token the store does not know is not looked up at Apple.
                    let before = mock.statisticsSnapshot.requests.values.reduce(0, +)
                    let unknown = try await api.get("\(Self.base(mock))&appAccountToken=\(UUID().uuidString)&refresh=always")
                    #expect(unknown.status == 200)
                    #expect(unknown.purchases.isEmpty)
                    #expect(mock.statisticsSnapshot.requests.values.reduce(0, +) == before)
                }
            }
        }
    }

    /// The requests the mock saw since `before`, per endpoint.
    static func requests(since before: [String: Int], _ mock: MockAppStore) -> [String: Int] {
        mock.statisticsSnapshot.requests.reduce(into: [:]) { made, entry in
            let count = entry.value - before[entry.key, default: 0]
            if count > 0 { made[entry.key] = count }
        }
    }

    @Test func aRefreshReadsOnlyStatusesAndTransactionHistoryNotNotificationHistory() async throws {
        try await TestDatabase.with { db in
            try await MockAppStore.withRunning(.init(scenario: .init(seed: 39, customers: 4))) { mock, baseURL in
                try await Self.withAPI(db, mock: mock, baseURL: baseURL, clock: ManualClock()) { api, _ in
                    let original = try #require(Self.originals(mock).first)
                    let asked: Set<String> = ["Get Transaction History", "Get All Subscription Statuses"]
                    // A transaction ID the store does not know is looked up at Apple, and found.
                    var before = mock.statisticsSnapshot.requests
                    let found = try await api.get("\(Self.base(mock))&transactionId=\(original)&refresh=always&timeout=30s")
                    #expect(found.status == 200, "\(found.text)")
                    #expect(found.purchases.first?["originalTransactionId"] as? String == original, "\(found.text)")
                    #expect(found.purchases.first?["fresh"] as? Bool == true)
                    var made = Self.requests(since: before, mock)
                    #expect(Set(made.keys) == asked, "\(made)")
                    #expect(made["Get All Subscription Statuses"] == 1)

                    // The customer is known now: refresh=always reads statuses and history again, nothing else.
                    before = mock.statisticsSnapshot.requests
                    let again = try await api.get("\(Self.base(mock))&originalTransactionId=\(original)&refresh=always&timeout=30s")
                    #expect(again.status == 200, "\(again.text)")
                    #expect(again.purchases.first?["fresh"] as? Bool == true)
                    made = Self.requests(since: before, mock)
                    #expect(made["Get Notification History"] == nil, "\(made)")
                    #expect(Set(made.keys) == asked, "\(made)")
                    #expect(made["Get All Subscription Statuses"] == 1)

                    // A transaction ID Apple does not know either: Apple answered (nothing), still no notification history.
                    before = mock.statisticsSnapshot.requests
                    let unknown = try await api.get("\(Self.base(mock))&transactionId=99999999999999&refresh=always&timeout=30s")
                    #expect(unknown.status == 200, "\(unknown.text)")
                    #expect(unknown.purchases.isEmpty)
                    #expect(Self.requests(since: before, mock)["Get Notification History"] == nil)
                    // A refresh is not a run: `status` and the run history list the runs alone.
                    #expect(try await db.count("SELECT count(*) FROM reconcile_runs") == 0)
                    #expect(try await db.count("SELECT count(*) FROM purchases WHERE history_checked_at_ms IS NOT NULL") >= 1)
                }
            }
        }
    }

    @Test func theDeadlineReachedAnswersTheStoredStateNotFresh() async throws {
        try await TestDatabase.with { db in
            var faults = FaultConfiguration()
            faults.latencyMilliseconds = 1500
            try await MockAppStore.withRunning(.init(scenario: .init(seed: 37, customers: 3), faults: faults)) { mock, baseURL in
                let clock = ManualClock()
                try await Self.withAPI(db, mock: mock, baseURL: baseURL, clock: clock) { api, _ in
                    let original = try #require(Self.originals(mock).first)
                    async let reply = api.get("\(Self.base(mock))&originalTransactionId=\(original)&refresh=always")
                    // The answer waits on the clock for its 3s default; Apple has not answered (each request takes 1.5s).
                    await clock.waitForSleepers(1)
                    clock.advance(by: .seconds(3))
                    let answered = try await reply
                    #expect(answered.status == 200, "\(answered.text)")
                    // Nothing stored yet: the stored state is the empty list, not Apple's answer.
                    #expect(answered.purchases.isEmpty)
                    // The refresh completes in the background: the purchase is stored afterwards.
                    try await eventually("the background refresh recorded the purchase") {
                        try await db.count("SELECT count(*) FROM purchases WHERE history_checked_at_ms IS NOT NULL") >= 1
                    }
                    let later = try await api.get("\(Self.base(mock))&originalTransactionId=\(original)")
                    #expect(later.purchases.count == 1)
                    #expect(later.purchases.first?["fresh"] as? Bool == false)
                    #expect(later.purchases.first?["checkedAt"] is NSNumber)
                }
            }
        }
    }

    @Test func refreshParametersAreCheckedBeforeAnythingIsRead() async throws {
        try await TestDatabase.with { db in
            try await MockAppStore.withRunning(.init(scenario: .init(seed: 38, customers: 2))) { mock, baseURL in
                try await Self.withAPI(db, mock: mock, baseURL: baseURL, clock: ManualClock()) { api, _ in
                    let before = try await db.stateFingerprint()
                    for query in [
                        "refresh=Always", "refresh=", "refresh=never", "refresh=if-stale&maxAge=60", "refresh=always&maxAge=60s",
                        "refresh=always&timeout=0s", "refresh=always&timeout=31s", "refresh=always&timeout=3", "maxAge=60s", "timeout=3s",
                    ] {
                        let reply = try await api.get("\(Self.base(mock))&transactionId=7100&\(query)")
                        #expect(reply.status == 400, "\(query): \(reply.text)")
                        #expect(reply.json["error"] as? String == "INVALID_QUERY", "\(query)")
                    }
                    #expect(mock.statisticsSnapshot.requests.isEmpty)
                    #expect(try await db.stateFingerprint() == before)
                }
            }
        }
    }

    /// A burst of refreshes beside a process that spends the app's budget (a run's gap filler)
    /// stays within the app's budget: the mock, limiting like Apple, answers no 429.
    @Test func aBurstOfRefreshesBesideARunMeetsNo429() async throws {
        try await TestDatabase.with { db in
            // Apple's limit is 10 per second per endpoint; the app's budget 8 of it.
            try await MockAppStore.withRunning(.init(scenario: .init(seed: 39, customers: 30), rateLimitPerSecond: 10)) { mock, baseURL in
                let budget = RequestBudget(environment: .production, appRequestsPerSecond: 8)
                let verifier = try mock.verifier()
                let scope = AppScope(target: verifier.configuration.target, entitlement: .init())
                // The run: its client's limiter follows the shared budget, as `run` does.
                let runClient = mock.client(baseURL: baseURL, requestsPerSecond: 8)
                let runBudget = SharedBudget(
                    configuration: .init(claims: budget.claims(AppRefresher.endpoints), process: "run"), database: db.database,
                    limiter: runClient.rateLimiter, app: scope.target)
                try await runBudget.join()
                let keeping = Task { await runBudget.keepShared() }
                defer { keeping.cancel() }
                let ledger = RunLedger(database: db.database)
                let run = try await ledger.createRun(
                    kind: .manual, app: scope.target, window: TimeWindow(milliseconds: 0..<1), dryRun: false, options: .init(refreshStatus: true),
                    shards: [], holder: "test")
                try await ledger.setPhase(runId: run.runId, .gapFill)
                let originals = Self.originals(mock)
                try await db.database.transaction { try await ledger.enqueue(runId: run.runId, anchors: originals, reason: .touched, on: $0) }
                let worker = RunWorker(
                    configuration: .init(runId: run.runId, concurrency: 4, worker: "run"), scope: scope, database: db.database, verifier: verifier,
                    client: runClient)
                try await Self.withAPI(db, mock: mock, baseURL: baseURL, clock: ManualClock(), budget: budget, refreshRateLimit: 2) { api, _ in
                    async let working: Void = worker.work(progress: RunProgress())
                    let replies = try await withThrowingTaskGroup(of: AppAPITests.Reply.self) { group in
                        for original in originals.prefix(8) {
                            group.addTask { try await api.get("\(Self.base(mock))&originalTransactionId=\(original)&refresh=always&timeout=30s") }
                        }
                        return try await group.reduce(into: []) { $0.append($1) }
                    }
                    try await working
                    #expect(replies.allSatisfy { $0.status == 200 })
                    #expect(replies.filter { $0.purchases.first?["fresh"] as? Bool == true }.count == replies.count)
                }
                #expect(mock.statisticsSnapshot.rateLimited == 0)
                #expect(mock.statisticsSnapshot.injectedRateLimits == 0)
            }
        }
    }

    /// An app without an In-App Purchase key: a refresh answers the stored state, `fresh: false`.
    @Test func anAppWithoutAKeyAnswersRefreshesWithTheStoredState() async throws {
        let tests = try AppAPITests()
        try await TestDatabase.with { db in
            try await TemporaryDirectory.with { directory in
                try await tests.seed(db, appAccountToken: UUID().uuidString.lowercased(), checkedAt: tests.app.start)
                try await tests.withAPI(db, in: directory) { api in
                    let reply = try await api.get("\(AppAPITests.base)&transactionId=7101&refresh=always")
                    #expect(reply.status == 200, "\(reply.text)")
                    #expect(reply.purchases.count == 1)
                    #expect(reply.purchases.first?["fresh"] as? Bool == false)
                }
            }
        }
    }

    /// `POST /v1/consumption/{transactionId}`: sent to Apple at once, 202 / 400 / 404 / 409, recorded as the app's.
    @Test func theAppsConsumptionAnswerIsSentAtOnceAndAnsweredWithItsStatus() async throws {
        try await ConsumptionPolicyTests.withRecoveredOutage(seed: 381) { db, mock, baseURL, target, now in
            let moment = Timestamp(millisecondsSince1970: now)
            let store = ConsumptionRequests(logger: TestDatabase.logger)
            let open = try await db.database.transaction { try await store.list(apps: [target.app], openAt: moment, on: $0) }
            let transactionId = try #require(open.first?.transactionId)
            var once = AppStoreServerAPIClient.RetryPolicy()
            once.maximumAttempts = 1
            try await Self.withAPI(db, mock: mock, baseURL: baseURL, clock: ManualClock(), retryPolicy: once) { api, _ in
                let query = "?bundleId=\(target.app.bundleId)&environment=production"
                let path = "/v1/consumption/\(transactionId)\(query)"
                let body = #"{"customerConsented": true, "deliveryStatus": "UNDELIVERED_OTHER", "sampleContentProvided": true}"#
                let before = try await db.stateFingerprint()
                for (uri, posted, status, code) in [
                    (
                        path, #"{"customerConsented": false, "deliveryStatus": "DELIVERED", "sampleContentProvided": false}"#, 400,
                        "CONSUMPTION_REFUSED"
                    ),
                    (path, #"{"customerConsented": true, "deliveryStatus": "LOST", "sampleContentProvided": false}"#, 400, "CONSUMPTION_REFUSED"),
                    (path, #"{"customerConsented": true}"#, 400, "MALFORMED_BODY"),
                    (path, "not json", 400, "MALFORMED_BODY"),
                    ("/v1/consumption/\(transactionId)?bundleId=\(target.app.bundleId)&environment=Production", body, 400, "INVALID_QUERY"),
                    ("/v1/consumption/\(transactionId)?bundleId=\(target.app.bundleId)&environment=sandbox", body, 503, "APP_NOT_CONFIGURED"),
                    ("/v1/consumption/9999999999999\(query)", body, 404, "UNKNOWN_CONSUMPTION_REQUEST"),
                ] {
                    let reply = try await api.post(uri, body: posted)
                    #expect(reply.status == status, "\(uri) \(posted): \(reply.text)")
                    #expect(reply.json["error"] as? String == code, "\(uri) \(posted): \(reply.text)")
                }
                #expect(try await db.stateFingerprint() == before)
                #expect(try await ConsumptionPolicyTests.received(baseURL).isEmpty)

                // Apple unreachable (a 5xx): 503, to be retried; the retry is accepted.
                var failing = FaultConfiguration()
                failing.serverErrorRate = 1
                mock.setFaults(failing)
                let unreachable = try await api.post(path, body: body)
                #expect(unreachable.status == 503, "\(unreachable.text)")
                #expect(unreachable.json["error"] as? String == "APPLE_UNREACHABLE")
                mock.setFaults(FaultConfiguration())

                let accepted = try await api.post(path, body: body)
                #expect(accepted.status == 202, "\(accepted.text)")
                #expect(accepted.json["answeredBy"] as? String == "app")
                let again = try await api.post(path, body: body)
                #expect(again.status == 409, "\(again.text)")
                #expect(again.json["error"] as? String == "CONSUMPTION_ALREADY_ANSWERED")
                let received = try await ConsumptionPolicyTests.received(baseURL)
                #expect(received.filter { $0.transactionId == transactionId }.map(\.deliveryStatus) == ["UNDELIVERED_OTHER"])
                #expect(
                    try await db.strings(
                        "SELECT answered_by || ' ' || outcome FROM consumption_answers WHERE transaction_id = \(transactionId) ORDER BY answer_id")
                        == ["app failed", "app accepted"])
            }
        }
    }
}
