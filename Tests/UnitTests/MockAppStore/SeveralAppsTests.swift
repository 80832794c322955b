import AppStoreServer
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import ReconcilerShared
import TestSupport
import Testing

@testable import MockAppStore

/// The mock serving several apps and both environments as Apple does, over real HTTP: one team key,
/// the JWT's `bid` routing each request to its app, a rate limiter per app and environment, the
/// sandbox on its own base URL, and admin endpoints that cover every app.
@Suite struct SeveralAppsTests {
    let now = Int64(Date().timeIntervalSince1970 * 1000)
    let hour: Int64 = 3_600_000
    static let one = MockAppStore.App(bundleId: "com.example.one", appAppleId: 1_234_567_890, environments: [.production, .sandbox])
    static let two = MockAppStore.App(bundleId: "com.example.two", appAppleId: 2_345_678_901, environments: [.production])
    let oneProduction = AppKey(bundleId: "com.example.one", environment: .production)
    let oneSandbox = AppKey(bundleId: "com.example.one", environment: .sandbox)
    let twoProduction = AppKey(bundleId: "com.example.two", environment: .production)

    func configuration(_ edit: (inout MockAppStore.Configuration) -> Void = { _ in }) -> MockAppStore.Configuration {
        var configuration = MockAppStore.Configuration(
            scenario: .init(seed: 5, customers: 10, now: now, span: 86_400_000, outageStart: now - 6 * hour, outageEnd: now - 3 * hour),
            apps: [Self.one, Self.two])
        edit(&configuration)
        return configuration
    }

    var window: NotificationHistoryRequest { .init(startDate: now - 2 * 86_400_000, endDate: now + hour) }

    func get(_ url: String) async throws -> (status: UInt, body: String) {
        let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: url), timeout: .seconds(30))
        return (response.status.code, String(buffer: try await response.body.collect(upTo: 64 << 20)))
    }

    func lines<Line: Decodable>(_ text: String, as type: Line.Type) throws -> [Line] {
        try text.split(separator: "\n").map { try JSONDecoder().decode(Line.self, from: Data($0.utf8)) }
    }

    /// Every notification a client reads from an app's history, verified for that app and environment.
    func history(_ mock: MockAppStore, _ app: AppKey) async throws -> [ResponseBodyV2DecodedPayload] {
        let client = try mock.client(bundleId: app.bundleId, environment: app.environment)
        let verifier = try mock.verifier(bundleId: app.bundleId, environment: app.environment)
        var result: [ResponseBodyV2DecodedPayload] = []
        for try await page in client.notificationHistory(window) {
            for item in page.items { result.append(try await verifier.verifyAndDecodeNotification(item.signedPayload ?? "")) }
        }
        return result
    }

    @Test func anAppIsReadAsBundleIdAppleIdAndEnvironments() throws {
        let app = try MockAppStore.App(parsing: "com.example.one:1234567890:production,sandbox")
        #expect(app == Self.one)
        #expect(try MockAppStore.App(parsing: "com.example.two:2345678901:Production").environments == [.production])
        for bad in ["com.example.one", "com.example.one:12x:production", "com.example.one:1:staging", ":1:production", "a:1:production:x"] {
            let error = #expect(throws: MockAppStore.ConfigurationError.self) { try MockAppStore.App(parsing: bad) }
            #expect(error?.code == .invalidApp, "\(bad)")
        }
    }

    @Test func aConfigurationThatCannotBeServedIsRefused() async throws {
        let twice = #expect(throws: MockAppStore.ConfigurationError.self) {
            try configuration { $0.apps = [Self.one, Self.one] }.validate()
        }
        #expect(twice?.code == .duplicateApp)
        let stranger = #expect(throws: MockAppStore.ConfigurationError.self) {
            try configuration { $0.unauthorizedApps = ["com.example.three"] }.validate()
        }
        #expect(stranger?.code == .unknownUnauthorizedApp)
        let repeated = #expect(throws: MockAppStore.ConfigurationError.self) {
            try configuration { $0.apps = [.init(bundleId: "com.example.one", appAppleId: 1, environments: [.sandbox, .sandbox])] }.validate()
        }
        #expect(repeated?.code == .invalidApp)
        let scale = #expect(throws: MockAppStore.ConfigurationError.self) {
            try configuration { $0.scenario.scaleNotifications = 100 }.validate()
        }
        #expect(scale?.code == .scaleWithSeveralApps)
    }

    /// Each app's JWT sees its own customers only, each app in each environment is a world of its
    /// own with its own transaction IDs, and the first keeps today's seed and IDs.
    @Test func theJWTsBundleIdRoutesEachRequestToItsApp() async throws {
        try await MockAppStore.withRunning(configuration()) { mock, baseURL in
            #expect(mock.baseURL(for: .production) == baseURL)
            var uuidsByApp: [AppKey: Set<String>] = [:]
            for app in [oneProduction, oneSandbox, twoProduction] {
                let notifications = try await history(mock, app)
                #expect(!notifications.isEmpty)
                for notification in notifications where notification.data != nil {
                    #expect(notification.data?.bundleId == app.bundleId)
                    #expect(notification.data?.environment == app.environment)
                }
                let expected = mock.sentNotifications(bundleId: app.bundleId, environment: app.environment)
                    .filter { $0.firstAttemptDate >= window.startDate && $0.firstAttemptDate < window.endDate }.map(\.notification.notificationUUID)
                uuidsByApp[app] = Set(notifications.compactMap(\.notificationUUID))
                #expect(uuidsByApp[app] == Set(expected))
            }
            #expect(uuidsByApp[oneProduction]!.isDisjoint(with: uuidsByApp[twoProduction]!))
            #expect(uuidsByApp[oneProduction]!.isDisjoint(with: uuidsByApp[oneSandbox]!))

            // Transaction IDs are unique across apps and environments, as Apple's are; the first
            // world keeps the first block, so one app is today's mock.
            let orders = mock.orders
            let ids = Dictionary(grouping: orders) { AppKey(bundleId: $0.bundleId ?? "", environment: .init(rawValue: $0.environment ?? "")) }
                .mapValues { Set($0.map(\.transactionId)) }
            #expect(Set(ids.keys) == [oneProduction, oneSandbox, twoProduction])
            #expect(ids[oneProduction]!.isDisjoint(with: ids[twoProduction]!))
            #expect(ids[oneProduction]!.isDisjoint(with: ids[oneSandbox]!))
            func block(_ id: String) -> Int64 { ((Int64(id) ?? 0) - 2_000_000_100_000_000) / 10_000_000_000 }
            #expect(Set(ids[oneProduction]!.map(block)) == [0])
            #expect(Set(ids[oneSandbox]!.map(block)) == [1])
            #expect(Set(ids[twoProduction]!.map(block)) == [2])
            var single = configuration().scenario
            single.bundleId = "com.example.one"
            #expect(
                mock.primary.catalog.snapshot.world.notifications.map(\.notificationUUID)
                    == ScenarioGenerator.generate(single).notifications.map(\.notificationUUID))

            // A customer of app two, read with app two's JWT, carries app two's transactions only.
            let twoCustomer = try #require(orders.first { $0.bundleId == "com.example.two" }).transactionId
            let twoClient = try mock.client(bundleId: "com.example.two", environment: .production)
            let page = try await twoClient.getTransactionHistory(anyTransactionId: twoCustomer, .init(sort: .ascending))
            #expect(page.bundleId == "com.example.two")
            let verifier = try mock.verifier(bundleId: "com.example.two", environment: .production)
            for signed in page.signedTransactions ?? [] {
                #expect(try await verifier.verifyAndDecodeTransaction(signed).bundleId == "com.example.two")
            }
            #expect(mock.statisticsSnapshot.crossAppRequests == 0)
            #expect(mock.statisticsSnapshot.apps?[twoProduction.description]?.requests["Get Transaction History"] == 1)
            #expect(mock.statisticsSnapshot.apps?[oneProduction.description]?.requests["Get Transaction History"] == nil)
            // Each app's JWTs are its own (the `bid` differs): the total's distinct tokens are the sum of the apps'.
            let tokens = mock.statisticsSnapshot
            #expect(tokens.apps?[oneProduction.description]?.distinctTokens == 1)
            #expect(tokens.apps?[oneSandbox.description]?.distinctTokens == 1)
            #expect(tokens.distinctTokens == tokens.apps?.values.map(\.distinctTokens).reduce(0, +))
        }
    }

    /// A transaction or order of another app gets Apple's answers (4040010, status 1) and is counted;
    /// the same app's ID asked in the other environment is Apple's documented probe, not counted.
    @Test func anotherAppsTransactionIsNotFoundAndCounted() async throws {
        try await MockAppStore.withRunning(configuration()) { mock, _ in
            let orders = mock.orders
            let twoOrder = try #require(orders.first { $0.bundleId == "com.example.two" })
            let oneOrder = try #require(orders.first { $0.bundleId == "com.example.one" && $0.environment == "Production" })
            let oneClient = try mock.client(bundleId: "com.example.one", environment: .production)
            let notFound = await #expect(throws: AppStoreServerAPIError.self) {
                _ = try await oneClient.getTransactionHistory(anyTransactionId: twoOrder.transactionId, .init(sort: .ascending))
            }
            #expect(notFound?.details.errorCode == .transactionIdNotFound)
            let statuses = await #expect(throws: AppStoreServerAPIError.self) {
                _ = try await oneClient.getAllSubscriptionStatuses(anyTransactionId: twoOrder.transactionId)
            }
            #expect(statuses?.details.errorCode == .transactionIdNotFound)
            let filtered = await #expect(throws: AppStoreServerAPIError.self) {
                var request = window
                request.transactionId = twoOrder.transactionId
                _ = try await oneClient.getNotificationHistory(request)
            }
            #expect(filtered?.details.errorCode == .transactionIdNotFound)
            #expect(try await oneClient.lookUpOrderId(twoOrder.orderId).status == .invalid)
            #expect(mock.statisticsSnapshot.crossAppRequests == 4)
            #expect(mock.statisticsSnapshot.apps?[oneProduction.description]?.crossAppRequests == 4)
            #expect(mock.statisticsSnapshot.apps?[twoProduction.description]?.crossAppRequests == 0)

            // Production first, then the sandbox on 4040010: the same app, so no cross-app request.
            let sandbox = try mock.client(bundleId: "com.example.one", environment: .sandbox)
            let probe = await #expect(throws: AppStoreServerAPIError.self) {
                _ = try await sandbox.getTransactionHistory(anyTransactionId: oneOrder.transactionId, .init(sort: .ascending))
            }
            #expect(probe?.details.errorCode == .transactionIdNotFound)
            #expect(mock.statisticsSnapshot.crossAppRequests == 4)
            let body = try await get("\(mock.baseURL(for: .sandbox)!)/mock/stats").body
            let stats = try JSONDecoder().decode(MockStatisticsSnapshot.self, from: Data(body.utf8))
            #expect(stats.crossAppRequests == 4)
            #expect(Set(stats.apps?.keys.map { $0 } ?? []) == [oneProduction.description, oneSandbox.description, twoProduction.description])
        }
    }

    /// Apple limits each app separately: app one's full second leaves app two's budget untouched.
    /// One app's window is filled by hand an hour ahead, so the assertion holds however slow the machine is.
    @Test func eachAppAndEnvironmentHasItsOwnRateLimiter() async throws {
        try await MockAppStore.withRunning(configuration { $0.rateLimitPerSecond = 2 }) { mock, _ in
            let limiters = [oneProduction, oneSandbox, twoProduction].map { ObjectIdentifier(mock.worldsByKey[$0]!.rateLimiter) }
            #expect(Set(limiters).count == 3)
            let ahead = Int64(Date().timeIntervalSince1970 * 1000) + 3_600_000
            for _ in 0..<2 {
                _ = mock.worldsByKey[oneProduction]!.rateLimiter.decide(endpoint: "Get Notification History", limit: 2, at: ahead)
            }
            func status(_ app: AppKey) async throws -> Int? {
                let client = try mock.client(
                    bundleId: app.bundleId, environment: app.environment, retryPolicy: .init(maximumAttempts: 1, maximumRateLimitedAttempts: 1))
                do {
                    _ = try await client.getNotificationHistory(window)
                    return 200
                } catch let error as AppStoreServerAPIError {
                    return error.details.httpStatusCode
                }
            }
            let statuses = [try await status(oneProduction), try await status(twoProduction), try await status(oneSandbox)]
            #expect(statuses == [429, 200, 200])
            let stats = mock.statisticsSnapshot
            #expect(stats.apps?[oneProduction.description]?.rateLimited == 1)
            #expect(stats.apps?[twoProduction.description]?.rateLimited == 0)
            #expect(stats.apps?[oneSandbox.description]?.rateLimited == 0)
            #expect(stats.rateLimited == 1)
        }
        // Apple's limits per app: the sandbox's are a tenth of production's.
        try await MockAppStore.withRunning(configuration()) { mock, _ in
            #expect(mock.limit(for: .notificationHistory, environment: .production) == 50)
            #expect(mock.limit(for: .notificationHistory, environment: .sandbox) == 5)
            #expect(mock.limit(for: .lookUpOrderId, environment: .sandbox) == 1)
        }
    }

    /// The sandbox answers on its own base URL with its own rules: 30 days of history, one delivery attempt.
    @Test func theSandboxHasItsOwnBaseURLThirtyDaysAndOneAttempt() async throws {
        try await MockAppStore.withRunning(configuration()) { mock, baseURL in
            let sandboxURL = try #require(mock.baseURL(for: .sandbox))
            #expect(sandboxURL != baseURL)
            let sandbox = try mock.client(bundleId: "com.example.one", environment: .sandbox)
            let production = try mock.client(bundleId: "com.example.one", environment: .production)
            let old = NotificationHistoryRequest(startDate: now - 31 * 86_400_000, endDate: now)
            let error = await #expect(throws: AppStoreServerAPIError.self) { _ = try await sandbox.getNotificationHistory(old) }
            #expect(error?.details.errorCode == .startDateTooFarInPast)
            _ = try await production.getNotificationHistory(old)
            _ = try await sandbox.getNotificationHistory(.init(startDate: now - 29 * 86_400_000, endDate: now))

            // Every sandbox notification was attempted once; production retried some failed in the outage.
            let sandboxNotifications = mock.sentNotifications(bundleId: "com.example.one", environment: .sandbox)
            #expect(!sandboxNotifications.isEmpty)
            #expect(sandboxNotifications.allSatisfy { mock.sendAttempts(notificationUUID: $0.notification.notificationUUID).count == 1 })
            let productionAttempts = mock.sentNotifications(bundleId: "com.example.one", environment: .production)
                .map { mock.sendAttempts(notificationUUID: $0.notification.notificationUUID).count }
            #expect(productionAttempts.contains { $0 > 1 })

            // App two has no sandbox purchases: its sandbox history is empty, its IDs unknown there.
            let twoSandbox = try mock.client(bundleId: "com.example.two", environment: .sandbox)
            #expect(try await twoSandbox.getNotificationHistory(window).notificationHistory?.isEmpty == true)
            // The admin endpoints answer on both base URLs.
            #expect(try await get("\(sandboxURL)/mock/health").status == 200)
        }
    }

    @Test func aKeyThatDoesNotCoverAnAppGets401ForThatAppOnly() async throws {
        try await MockAppStore.withRunning(configuration { $0.unauthorizedApps = ["com.example.two"] }) { mock, _ in
            let two = try mock.client(bundleId: "com.example.two", environment: .production)
            let error = await #expect(throws: AppStoreServerAPIError.self) { _ = try await two.getNotificationHistory(window) }
            #expect(error?.details.httpStatusCode == 401)
            _ = try await mock.client(bundleId: "com.example.one", environment: .production).getNotificationHistory(window)
            _ = try await mock.client(bundleId: "com.example.one", environment: .sandbox).getNotificationHistory(window)
            let stats = mock.statisticsSnapshot
            #expect(stats.unauthorized == 1)
            #expect(stats.apps?[twoProduction.description]?.unauthorized == 1)
            #expect(stats.apps?[oneProduction.description]?.unauthorized == 0)
        }
    }

    /// With shared transaction IDs two apps have purchases with the same IDs: the truth lists both, in
    /// `reconciler export`'s order, each request reads its own app's, and a refund names its app.
    @Test func truthNotificationsAndOrdersCoverEveryApp() async throws {
        try await MockAppStore.withRunning(configuration { $0.sharedTransactionIds = true }) { mock, baseURL in
            let truth = try lines(try await get("\(baseURL)/mock/truth?at=\(now)").body, as: PurchaseState.self)
            let expected = mock.simulatedWorlds.map { GroundTruth.purchases($0.catalog.snapshot.world, at: now).count }.reduce(0, +)
            #expect(truth.count == expected)
            // Each world's purchases, under its own app and environment, exactly as its own scenario has them.
            for world in mock.simulatedWorlds {
                let own = truth.filter { $0.bundleId == world.key.bundleId && $0.environment == world.key.environment }
                #expect(own == GroundTruth.purchases(world.catalog.snapshot.world, at: now), "\(world.key)")
            }
            #expect(
                Set(truth.map { "\($0.bundleId ?? "")/\($0.environment?.rawValue ?? "")" })
                    == [oneProduction, oneSandbox, twoProduction].map(\.description).set)
            let keys = truth.map { [$0.originalTransactionId, $0.bundleId ?? "", $0.environment?.rawValue ?? ""] }
            #expect(keys == keys.sorted { $0.lexicographicallyPrecedes($1) })
            // Some original transaction IDs are purchases of both apps.
            let shared = try #require(
                Dictionary(grouping: truth, by: \.originalTransactionId).first { (id: String, purchases: [PurchaseState]) -> Bool in
                    let (first, last) = (purchases.first, purchases.last)
                    let ofOne = first?.bundleId == "com.example.one" && first?.environment == .production
                    return ofOne && last?.bundleId == "com.example.two" && last?.revocationDate == nil
                })

            let notifications = try lines(try await get("\(baseURL)/mock/notifications").body, as: MockAppStore.NotificationLine.self)
            #expect(
                Set(notifications.map { "\($0.bundleId)/\($0.environment)" }) == [oneProduction, oneSandbox, twoProduction].map(\.description).set)
            let sent = mock.simulatedWorlds.map { mock.sentNotifications(bundleId: $0.key.bundleId, environment: $0.key.environment).count }
            #expect(notifications.count == sent.reduce(0, +))
            #expect(notifications.map(\.firstAttemptDate) == notifications.map(\.firstAttemptDate).sorted())
            let orders = try lines(try await get("\(baseURL)/mock/orders").body, as: MockOrder.self)
            #expect(orders.count == mock.orders.count)
            #expect(
                Set(orders.map { "\($0.bundleId ?? "")/\($0.environment ?? "")" })
                    == [oneProduction, oneSandbox, twoProduction].map(\.description).set)

            // The same ID in every app: each JWT reads its own app's purchase; nothing is cross-app.
            let id = shared.key
            for app in [oneProduction, twoProduction] {
                let page = try await mock.client(bundleId: app.bundleId, environment: .production).getTransactionHistory(
                    anyTransactionId: id, .init(sort: .ascending))
                #expect(page.bundleId == app.bundleId)
            }
            #expect(mock.statisticsSnapshot.crossAppRequests == 0)

            // A refund names its app and environment when several have the ID.
            func refund(_ transactionId: String, _ query: String) async throws -> (status: UInt, body: String) {
                var request = HTTPClientRequest(url: "\(baseURL)/mock/refund?transactionId=\(transactionId)\(query)")
                request.method = .POST
                let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
                return (response.status.code, String(buffer: try await response.body.collect(upTo: 1 << 16)))
            }
            #expect(try await refund(id, "").status == 400)
            let latest = try #require(shared.value.last?.latestTransactionId)
            let refunded = try await refund(latest, "&bundleId=com.example.two&environment=Production")
            #expect(refunded.status == 200)
            #expect(refunded.body.contains("\"bundleId\":\"com.example.two\""))
            let after = try lines(try await get("\(baseURL)/mock/truth?at=\(now)").body, as: PurchaseState.self)
                .filter { $0.originalTransactionId == id }
            #expect(after.count == shared.value.count)
            #expect(Array(after.dropLast()) == Array(shared.value.dropLast()))
            #expect(after.last?.bundleId == "com.example.two")
            #expect(after.last?.revocationDate != nil)
        }
    }

    /// Every app's and environment's notifications go to the one webhook, as Apple sends sandbox
    /// notifications to the production URL when no sandbox URL is set.
    @Test func everyAppsNotificationsGoToTheOneWebhook() async throws {
        let receiver = AppWebhookReceiver(configuration: .init())
        try await withThrowingTaskGroup(of: Void.self) { group in
            let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
            group.addTask { try await receiver.run { continuation.yield($0) } }
            defer { group.cancelAll() }
            var iterator = ports.makeAsyncIterator()
            let port = try #require(await iterator.next())
            let webhook = "http://127.0.0.1:\(port)/notifications"
            try await MockAppStore.withRunning(configuration { $0.webhookURL = webhook }) { mock, baseURL in
                let notifications = try lines(try await get("\(baseURL)/mock/notifications").body, as: MockAppStore.NotificationLine.self)
                let delivered = notifications.filter(\.delivered)
                #expect(
                    Set(delivered.map { "\($0.bundleId)/\($0.environment)" }) == [oneProduction, oneSandbox, twoProduction].map(\.description).set)
                #expect(Set(receiver.statistics.acknowledged.keys) == Set(delivered.map(\.notificationUUID)))
                #expect(
                    mock.statisticsSnapshot.apps?.mapValues(\.liveDeliveryComplete)
                        == [oneProduction, oneSandbox, twoProduction].reduce(into: [:]) { $0[$1.description] = true })
                #expect(
                    mock.statisticsSnapshot.apps?[oneSandbox.description]?.deliverySuccesses == delivered.filter { $0.environment == "Sandbox" }.count
                )
            }
        }
    }

    /// `--credentials-dir` receives the root, the team key, the App Store Connect key,
    /// `reconciler.env` for the first app and `reconciler.yaml` for every app (with the
    /// `notificationURL` and `appStoreConnect` doctor reads), in exactly the format of the
    /// reconciler's configuration file.
    @Test func theCredentialsDirectoryHoldsAConfigurationFileForEveryApp() async throws {
        let temporary = try TemporaryDirectory.create("mock-apps")
        defer { temporary.remove() }
        let directory = temporary.file("credentials")
        try await MockAppStore.withRunning(configuration { $0.credentialsDirectory = directory }) { mock, baseURL in
            let sandboxURL = try #require(mock.baseURL(for: .sandbox))
            let yaml = try String(contentsOfFile: "\(directory)/reconciler.yaml", encoding: .utf8)
            #expect(
                yaml == """
                    # Written by mock-appstore: every app and environment it serves (reconciler --config FILE).
                    key:
                      id: MOCKKEY001
                      issuer: 57246542-96fe-1a63-e053-0824d011072a
                      privateKeyPath: \(directory)/AuthKey_MOCKKEY001.p8
                    apiBaseURL:
                      production: \(baseURL)
                      sandbox: \(sandboxURL)
                    rootCertificates: [\(directory)/root.pem]
                    apps:
                      - bundleId: com.example.one
                        appAppleId: 1234567890
                        environments: [production, sandbox]
                      - bundleId: com.example.two
                        appAppleId: 2345678901
                        environments: [production]
                    notificationURL: http://127.0.0.1:8080/notifications
                    appStoreConnect:
                      id: MOCKASC001
                      issuer: 57246542-96fe-1a63-e053-0824d011072a
                      privateKeyPath: \(directory)/AuthKey_MOCKASC001.p8
                      baseURL: \(baseURL)
                    nonRenewingTerms: {com.example.pass.season: 8h}

                    """)
            let environment = try String(contentsOfFile: "\(directory)/reconciler.env", encoding: .utf8)
            #expect(environment.contains("APP_STORE_API_BASE_URL=\(baseURL)\n"))
            #expect(environment.contains("APP_STORE_BUNDLE_ID=com.example.one\n"))
            #expect(environment.contains("APP_STORE_ENVIRONMENT=production\n"))
            #expect(FileManager.default.fileExists(atPath: "\(directory)/root.pem"))
            #expect(FileManager.default.fileExists(atPath: "\(directory)/AuthKey_MOCKKEY001.p8"))
            #expect(
                try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
                    == ["AuthKey_MOCKASC001.p8", "AuthKey_MOCKKEY001.p8", "reconciler.env", "reconciler.yaml", "root.pem"])
        }
        // With a rate limit, the file names it for each environment.
        let limited = MockAppStore.Configuration(scenario: .init(seed: 1, customers: 0), rateLimitPerSecond: 7, apps: [Self.one])
        let mock = try await MockAppStore.make(configuration: limited)
        let text = mock.reconcilerConfigurationYAML(baseURLs: [.production: "http://p", .sandbox: "http://s"], directory: "/d")
        #expect(text.contains("\nrateLimit: {production: 7, sandbox: 7}\n"))
        #expect(YAMLText.scalar("a b") == "\"a b\"")
        #expect(YAMLText.scalar("1234") == "\"1234\"")
        #expect(YAMLText.scalar("/tmp/x/root.pem") == "/tmp/x/root.pem")
    }
}

extension Array where Element: Hashable {
    fileprivate var set: Set<Element> { Set(self) }
}
