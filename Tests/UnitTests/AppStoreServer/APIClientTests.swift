import AppStoreServer
import AsyncHTTPClient
import Crypto
import Foundation
import MockAppStore
import NIOCore
import NIOHTTP1
import TestSupport
import Testing

/// The API client against the mock App Store over real HTTP.
@Suite struct APIClientTests {
    static func scenario(customers: Int = 40, seed: UInt64 = 11) -> ScenarioConfiguration {
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        return ScenarioConfiguration(seed: seed, customers: customers, now: now, outageStart: now - 6 * 3_600_000, outageEnd: now - 3 * 3_600_000)
    }

    static var fastRetries: AppStoreServerAPIClient.RetryPolicy {
        .init(maximumAttempts: 8, maximumRateLimitedAttempts: 40, initialBackoff: .milliseconds(20), maximumBackoff: .milliseconds(200))
    }

    func window(_ mock: MockAppStore) -> NotificationHistoryRequest {
        let scenario = mock.configuration.scenario
        return NotificationHistoryRequest(startDate: scenario.start - 86_400_000, endDate: scenario.now + 60_000)
    }

    /// Pages through a query and returns the UUIDs seen, in order.
    func uuids(_ client: AppStoreServerAPIClient, _ request: NotificationHistoryRequest, verifier: SignedDataVerifier) async throws -> [String] {
        var seen: [String] = []
        for try await page in client.notificationHistory(request) {
            #expect(page.items.count <= 20)
            for item in page.items {
                seen.append(try await verifier.verifyAndDecodeNotification(item.signedPayload ?? "").notificationUUID ?? "")
            }
        }
        return seen
    }

    @Test func pagingReturnsEveryNotificationOnceOldestFirst() async throws {
        try await MockAppStore.withRunning(.init(scenario: Self.scenario())) { mock, baseURL in
            let client = mock.client(baseURL: baseURL)
            let request = window(mock)
            let seen = try await uuids(client, request, verifier: try mock.verifier())
            let expected = mock.sentNotifications.filter { $0.firstAttemptDate >= request.startDate && $0.firstAttemptDate < request.endDate }
            #expect(seen == expected.map(\.notification.notificationUUID))
            #expect(seen.count > 40)
            #expect(Set(seen).count == seen.count)
            #expect(client.statistics.snapshot.requests == (seen.count + 19) / 20)
        }
    }

    @Test func theSameTokenIsReusedUntilItNearsExpiry() async throws {
        try await MockAppStore.withRunning(.init(scenario: Self.scenario(customers: 10))) { mock, baseURL in
            let client = mock.client(baseURL: baseURL)
            _ = try await uuids(client, window(mock), verifier: try mock.verifier())
            _ = try await client.getAllSubscriptionStatuses(anyTransactionId: firstTransactionId(mock))
            #expect(client.tokens.tokensSigned == 1)
            #expect(mock.statisticsSnapshot.distinctTokens == 1)
            // A token close to expiry is replaced.
            let tokens = APIAuthenticationTokens(
                configuration: .init(
                    privateKey: mock.apiKey, keyId: "K", issuerId: "I", bundleId: "B", lifetime: .seconds(600), renewalMargin: .seconds(120)))
            let first = try tokens.token(now: Date(timeIntervalSince1970: 1_000_000))
            #expect(try tokens.token(now: Date(timeIntervalSince1970: 1_000_400)) == first)
            #expect(try tokens.token(now: Date(timeIntervalSince1970: 1_000_500)) != first)
        }
    }

    func firstTransactionId(_ mock: MockAppStore) -> String {
        mock.sentNotifications.first { $0.notification.transaction?.type == .autoRenewableSubscription }!.notification.transaction!.transactionId!
    }

    @Test func transactionHistoryFiltersUseRepeatedParametersAndRevisions() async throws {
        try await MockAppStore.withRunning(.init(scenario: Self.scenario(customers: 60))) { mock, baseURL in
            let client = mock.client(baseURL: baseURL)
            let verifier = try mock.verifier()
            // An account with a subscription and consumables.
            let subscriberWithCoins = mock.sentNotifications.map(\.notification).first { plan in
                plan.transaction?.type == .consumable
                    && mock.sentNotifications.contains {
                        $0.notification.accountId == plan.accountId && $0.notification.transaction?.type == .autoRenewableSubscription
                    }
            }
            let anyId = try #require(subscriberWithCoins?.transaction?.transactionId)
            var all: [JWSTransactionDecodedPayload] = []
            var revision: String?
            for try await page in client.transactionHistory(anyTransactionId: anyId, .init(sort: .ascending)) {
                for signed in page.signedTransactions ?? [] { all.append(try await verifier.verifyAndDecodeTransaction(signed)) }
                revision = page.revision
            }
            #expect(Set(all.compactMap(\.type)).count >= 2)
            let filtered = try await client.getTransactionHistory(
                anyTransactionId: anyId, .init(productIds: ["com.example.coins.100", "com.example.lifetime"], sort: .ascending))
            let products = try await (filtered.signedTransactions ?? []).asyncMap { try await verifier.verifyAndDecodeTransaction($0).productId }
            #expect(!products.isEmpty)
            #expect(products.allSatisfy { $0 == "com.example.coins.100" || $0 == "com.example.lifetime" })
            #expect(products.count == all.filter { $0.productId == "com.example.coins.100" || $0.productId == "com.example.lifetime" }.count)

            // Nothing changed: the stored revision returns nothing.
            let unchanged = try await client.getTransactionHistory(anyTransactionId: anyId, .init(revision: revision, sort: .ascending))
            #expect(unchanged.signedTransactions?.isEmpty == true)
            #expect(unchanged.hasMore == false)
            // A refund now modifies a transaction: the stored revision returns exactly it, again.
            let refunded = try #require(all.first { $0.type == .consumable && $0.revocationDate == nil }?.transactionId)
            let reply = try await HTTPClient.shared.execute(
                HTTPClientRequest.post("\(baseURL)/mock/refund?transactionId=\(refunded)"), timeout: .seconds(60))
            #expect(reply.status.code == 200)
            let changed = try await client.getTransactionHistory(anyTransactionId: anyId, .init(revision: revision, sort: .ascending))
            let again = try await (changed.signedTransactions ?? []).asyncMap { try await verifier.verifyAndDecodeTransaction($0) }
            #expect(again.map(\.transactionId) == [refunded])
            #expect(again.first?.revocationDate != nil)
        }
    }

    @Test func errorsCarryApplesCodeAndFailFastWhenNotRetryable() async throws {
        try await MockAppStore.withRunning(.init(scenario: Self.scenario(customers: 5))) { mock, baseURL in
            let client = mock.client(baseURL: baseURL)
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            // 400 naming the bad field.
            let tooOld = await #expect(throws: AppStoreServerAPIError.self) {
                _ = try await client.getNotificationHistory(.init(startDate: now - 200 * 86_400_000, endDate: now))
            }
            guard case .badRequest(let details) = tooOld else {
                Issue.record("expected badRequest, got \(String(describing: tooOld))")
                return
            }
            #expect(details.errorCode == .startDateTooFarInPast)
            #expect(details.attempts == 1)
            #expect(String(describing: tooOld!).contains("startDate"))
            // Both filters at once.
            let both = await #expect(throws: AppStoreServerAPIError.self) {
                _ = try await client.getNotificationHistory(
                    .init(startDate: now - 3_600_000, endDate: now, notificationType: .didRenew, transactionId: "1"))
            }
            #expect(both?.details.errorCode == .multipleFiltersSupplied)
            // 404.
            let missing = await #expect(throws: AppStoreServerAPIError.self) {
                _ = try await client.getTransactionHistory(anyTransactionId: "999999999", .init())
            }
            guard case .notFound(let notFound) = missing else {
                Issue.record("expected notFound")
                return
            }
            #expect(notFound.errorCode == .transactionIdNotFound)
            // 401: a key the mock does not know, never retried.
            let stranger = mock.client(baseURL: baseURL, privateKey: P256.Signing.PrivateKey())
            let unauthorized = await #expect(throws: AppStoreServerAPIError.self) {
                _ = try await stranger.getAllSubscriptionStatuses(anyTransactionId: "1")
            }
            guard case .unauthorized(let details401) = unauthorized else {
                Issue.record("expected unauthorized")
                return
            }
            #expect(details401.attempts == 1)
            // The command line names its own settings; the API client does not know them.
            #expect(!String(describing: unauthorized!).contains("APP_STORE_"))
        }
    }

    /// Apple lists 5000000 GeneralInternalError apart from its retryable 5000001: the first is not
    /// sent again, the second is retried until the client's policy gives up.
    @Test func generalInternalErrorIsNotRetriedButItsRetryableSiblingIs() async throws {
        try await MockAppStore.withRunning(.init(scenario: Self.scenario(customers: 5))) { mock, baseURL in
            var faults = FaultConfiguration()
            let client = mock.client(baseURL: baseURL, retryPolicy: Self.fastRetries)
            let customer = firstTransactionId(mock)
            faults.failingCustomers = [customer]
            faults.failingCustomersErrorCode = 5_000_000
            mock.setFaults(faults)
            let final = await #expect(throws: AppStoreServerAPIError.self) {
                _ = try await client.getTransactionHistory(anyTransactionId: customer, .init())
            }
            #expect(final?.details.errorCode == .generalInternal)
            #expect(final?.details.attempts == 1)
            faults.failingCustomersErrorCode = 5_000_001
            mock.setFaults(faults)
            let retried = await #expect(throws: AppStoreServerAPIError.self) {
                _ = try await client.getTransactionHistory(anyTransactionId: customer, .init())
            }
            #expect(retried?.details.errorCode == .generalInternalRetryable)
            #expect(retried?.details.attempts == Self.fastRetries.maximumAttempts)
        }
    }

    /// Look Up Order ID over HTTP: a scenario's order is found, with its verified transaction; an
    /// unknown or malformed order ID is status 1, not an error.
    @Test func lookUpOrderIdFindsTheScenariosOrders() async throws {
        try await MockAppStore.withRunning(.init(scenario: Self.scenario(customers: 20))) { mock, baseURL in
            let client = mock.client(baseURL: baseURL)
            let verifier = try mock.verifier()
            let renewal = try #require(mock.orders.first { $0.transactionId != $0.originalTransactionId })
            let answer = try await client.lookUpOrderId(renewal.orderId)
            #expect(answer.status == .valid)
            let transactions = try await (answer.signedTransactions ?? []).asyncMap { try await verifier.verifyAndDecodeTransaction($0) }
            #expect(transactions.map(\.transactionId) == [renewal.transactionId])
            #expect(transactions.first?.originalTransactionId == renewal.originalTransactionId)
            let known = Set(mock.orders.map(\.orderId))
            let unknown = try #require(["AAAAAAAAAA", "ZZZZZZZZZZ"].first { !known.contains($0) })
            #expect(try await client.lookUpOrderId(unknown).status == .invalid)
            let malformed = try await client.lookUpOrderId("#1 not an order?")
            #expect(malformed.status == .invalid)
            #expect(malformed.signedTransactions == nil)
            #expect(client.statistics.snapshot.failedCalls == 0)
            #expect(mock.statisticsSnapshot.requests["Look Up Order ID"] == 3)
        }
    }

    /// Look Up Order ID has its own budget, 80% of Apple's 10 a second (10% of that in the
    /// sandbox); a burst of lookups against a mock that allows fewer is waited out, never failed.
    @Test func lookUpOrderIdKeepsToItsOwnLimit() async throws {
        #expect(RateLimiter.defaultBudget(environment: .production)[.lookUpOrderId] == 8)
        #expect(abs((RateLimiter.defaultBudget(environment: .sandbox)[.lookUpOrderId] ?? 0) - 0.8) < 1e-9)
        try await MockAppStore.withRunning(.init(scenario: Self.scenario(customers: 10), rateLimitPerSecond: 2)) { mock, baseURL in
            let client = mock.client(baseURL: baseURL, requestsPerSecond: 40, retryPolicy: Self.fastRetries)
            let orders = Array(mock.orders.prefix(8))
            let found = try await withThrowingTaskGroup(of: [String].self) { group in
                for order in orders {
                    group.addTask {
                        let answer = try await client.lookUpOrderId(order.orderId)
                        #expect(answer.status == .valid)
                        return try await (answer.signedTransactions ?? []).asyncMap {
                            try await mock.verifier().verifyAndDecodeTransaction($0).transactionId!
                        }
                    }
                }
                return try await group.reduce(into: Set<String>()) { $0.formUnion($1) }
            }
            #expect(found == Set(orders.map(\.transactionId)))
            let server = mock.statisticsSnapshot
            #expect(client.statistics.snapshot.failedCalls == 0)
            #expect(client.statistics.snapshot.rateLimited == server.rateLimited)
            #expect(server.requests["Look Up Order ID"] == orders.count + server.rateLimited)
            #expect((server.maxRequestsInOneSecond["Look Up Order ID"] ?? 0) <= 2)
        }
    }

    @Test func anExpiredPaginationTokenIsItsOwnCase() async throws {
        try await MockAppStore.withRunning(.init(scenario: Self.scenario())) { mock, baseURL in
            let client = mock.client(baseURL: baseURL)
            let first = try await client.getNotificationHistory(window(mock))
            #expect(first.hasMore == true)
            var faults = FaultConfiguration()
            faults.expiredTokenRate = 1
            mock.setFaults(faults)
            let error = await #expect(throws: AppStoreServerAPIError.self) {
                _ = try await client.getNotificationHistory(window(mock), paginationToken: first.paginationToken)
            }
            guard case .paginationTokenExpired = error else {
                Issue.record("expected paginationTokenExpired, got \(String(describing: error))")
                return
            }
            // A changed body with a valid token is refused the same way.
            mock.setFaults(FaultConfiguration())
            var other = window(mock)
            other.onlyFailures = true
            let changed = await #expect(throws: AppStoreServerAPIError.self) {
                _ = try await client.getNotificationHistory(other, paginationToken: first.paginationToken)
            }
            guard case .paginationTokenExpired = changed else {
                Issue.record("expected paginationTokenExpired")
                return
            }
        }
    }

    @Test func serverErrorsDropsAndTruncationsAreRetried() async throws {
        var faults = FaultConfiguration()
        faults.serverErrorRate = 0.2
        faults.dropRate = 0.1
        faults.truncateRate = 0.1
        try await MockAppStore.withRunning(.init(scenario: Self.scenario(), faults: faults)) { mock, baseURL in
            let client = mock.client(baseURL: baseURL, retryPolicy: Self.fastRetries)
            let request = window(mock)
            let seen = try await uuids(client, request, verifier: try mock.verifier())
            let expected = mock.sentNotifications.filter { $0.firstAttemptDate >= request.startDate && $0.firstAttemptDate < request.endDate }
            #expect(seen == expected.map(\.notification.notificationUUID))
            let stats = client.statistics.snapshot
            let server = mock.statisticsSnapshot
            #expect(stats.retries > 0)
            #expect(stats.serverErrors == server.injectedServerErrors)
            #expect(stats.transportErrors >= server.droppedConnections)
        }
    }

    @Test func retriesAreBounded() async throws {
        var faults = FaultConfiguration()
        faults.serverErrorRate = 1
        try await MockAppStore.withRunning(.init(scenario: Self.scenario(customers: 2), faults: faults)) { mock, baseURL in
            let client = mock.client(
                baseURL: baseURL, retryPolicy: .init(maximumAttempts: 3, initialBackoff: .milliseconds(1), maximumBackoff: .milliseconds(5)))
            let error = await #expect(throws: AppStoreServerAPIError.self) {
                _ = try await client.getNotificationHistory(window(mock))
            }
            guard case .serverError(let details) = error else {
                Issue.record("expected serverError")
                return
            }
            #expect(details.attempts == 3)
            #expect(details.errorCode == .generalInternalRetryable)
            #expect(mock.statisticsSnapshot.requests["Get Notification History"] == 3)
        }
    }

    /// The mock allows 2 requests a second while the client would send 40, one request at a time:
    /// after each 429 the next request must not leave before the Retry-After instant.
    @Test func aRateLimitedClientNeverSendsBeforeRetryAfter() async throws {
        try await MockAppStore.withRunning(.init(scenario: Self.scenario(customers: 30), rateLimitPerSecond: 2)) { mock, baseURL in
            let client = mock.client(baseURL: baseURL, requestsPerSecond: 40, retryPolicy: Self.fastRetries)
            let transactionIds = Array(Set(mock.sentNotifications.compactMap(\.notification.transaction?.transactionId)).sorted().prefix(12))
            // Four at once first, so the mock answers 429 however slow this machine is (one at a time,
            // a loaded machine can stay under 2 a second); then one at a time, each after the last.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for id in transactionIds.prefix(4) { group.addTask { _ = try await client.getTransactionHistory(anyTransactionId: id, .init()) } }
                try await group.waitForAll()
            }
            // Only the one-at-a-time requests are judged: each leaves after every earlier answer was
            // read, so one that arrives before an announced Retry-After was sent too early. (Of the
            // four at once, one sent before another's 429 reached the client can arrive after it on a
            // loaded machine, later than the mock's allowance for requests in flight.)
            let violationsOfTheBurst = mock.statisticsSnapshot.retryAfterViolations
            for id in transactionIds.dropFirst(4) {
                _ = try await client.getTransactionHistory(anyTransactionId: id, .init())
            }
            let server = mock.statisticsSnapshot
            #expect(server.rateLimited > 0)
            #expect(server.retryAfterViolations == violationsOfTheBurst)
            #expect(client.statistics.snapshot.rateLimited == server.rateLimited)
            #expect(server.requests["Get Transaction History"] == transactionIds.count + server.rateLimited)
        }
    }

    /// The same with twelve requests at once: every 429 is waited out and retried.
    @Test func aBurstOverTheLimitIsRetriedAfterRetryAfter() async throws {
        try await MockAppStore.withRunning(.init(scenario: Self.scenario(customers: 30), rateLimitPerSecond: 4)) { mock, baseURL in
            let client = mock.client(baseURL: baseURL, requestsPerSecond: 40, retryPolicy: Self.fastRetries)
            let transactionIds = Array(Set(mock.sentNotifications.compactMap(\.notification.transaction?.transactionId)).sorted().prefix(12))
            try await withThrowingTaskGroup(of: Void.self) { group in
                for id in transactionIds {
                    group.addTask { _ = try await client.getTransactionHistory(anyTransactionId: id, .init()) }
                }
                try await group.waitForAll()
            }
            let server = mock.statisticsSnapshot
            #expect(server.rateLimited > 0)
            #expect(client.statistics.snapshot.rateLimited == server.rateLimited)
            #expect(server.requests["Get Transaction History"] == transactionIds.count + server.rateLimited)
        }
    }

    @Test func injected429sWithRetryAfterAreHonoured() async throws {
        var faults = FaultConfiguration()
        faults.rateLimitedRate = 0.3
        try await MockAppStore.withRunning(.init(scenario: Self.scenario(), faults: faults)) { mock, baseURL in
            let client = mock.client(baseURL: baseURL, retryPolicy: Self.fastRetries)
            let seen = try await uuids(client, window(mock), verifier: try mock.verifier())
            #expect(!seen.isEmpty)
            #expect(mock.statisticsSnapshot.injectedRateLimits > 0)
            #expect(mock.statisticsSnapshot.retryAfterViolations == 0)
        }
    }

    /// A proxy's `Retry-After: 1` means one second after the response, not 1 ms after 1970: the
    /// retry arrives after the instant the mock announced. The margin is longer than the mock's
    /// in-flight allowance (250 ms), so a client that read "1" as "retry now" would be caught.
    @Test func aDeltaSecondsRetryAfterIsWaitedOut() async throws {
        var faults = FaultConfiguration()
        faults.rateLimitedRate = 0.5
        faults.retryAfterFormat = .deltaSeconds
        try await MockAppStore.withRunning(.init(scenario: Self.scenario(customers: 5), faults: faults)) { mock, baseURL in
            var policy = Self.fastRetries
            policy.retryAfterMargin = .milliseconds(300)
            let client = mock.client(baseURL: baseURL, retryPolicy: policy)
            let id = firstTransactionId(mock)
            for _ in 0..<2 {
                _ = try await client.getAllSubscriptionStatuses(anyTransactionId: id)
            }
            let server = mock.statisticsSnapshot
            #expect(server.injectedRateLimits == 2)
            #expect(server.retryAfterViolations == 0)
            #expect(server.requests["Get All Subscription Statuses"] == 4)
            #expect(client.statistics.snapshot.rateLimited == 2)
        }
    }

    /// A `Retry-After` an hour ahead, beyond the two-minute cap, in any of its forms: the call fails
    /// at once with its own case, and the endpoint stays closed for every later call of the process
    /// without a request; other endpoints stay open.
    @Test(arguments: FaultConfiguration.RetryAfterFormat.allCases)
    func aRetryAfterBeyondTheCapFailsAtOnceForEveryCaller(format: FaultConfiguration.RetryAfterFormat) async throws {
        var faults = FaultConfiguration()
        faults.rateLimitedRate = 1
        faults.rateLimitedRetryAfterSeconds = 3600
        faults.retryAfterFormat = format
        try await MockAppStore.withRunning(.init(scenario: Self.scenario(customers: 5), faults: faults)) { mock, baseURL in
            let client = mock.client(baseURL: baseURL, retryPolicy: Self.fastRetries)
            #expect(client.configuration.retryPolicy.maximumRetryAfter == .seconds(120))
            let id = firstTransactionId(mock)
            let first = await #expect(throws: AppStoreServerAPIError.self) {
                _ = try await client.getAllSubscriptionStatuses(anyTransactionId: id)
            }
            guard case .retryAfterTooLong(let details, let reopensAt) = first else {
                Issue.record("expected retryAfterTooLong, got \(String(describing: first))")
                return
            }
            #expect(details.attempts == 1)
            #expect(details.httpStatusCode == 429)
            #expect(details.errorCode == .rateLimitExceeded)
            // About an hour ahead (as announced), not 1970.
            #expect(reopensAt > Int64(Date().timeIntervalSince1970 * 1000) + 3_000_000)
            #expect(mock.statisticsSnapshot.requests["Get All Subscription Statuses"] == 1)

            mock.setFaults(FaultConfiguration())
            let second = await #expect(throws: AppStoreServerAPIError.self) {
                _ = try await client.getAllSubscriptionStatuses(anyTransactionId: id)
            }
            guard case .retryAfterTooLong(let refused, let reopensAgain) = second else {
                Issue.record("expected retryAfterTooLong, got \(String(describing: second))")
                return
            }
            #expect(refused.attempts == 0)
            #expect(abs(reopensAgain - reopensAt) < 1000)
            #expect(mock.statisticsSnapshot.requests["Get All Subscription Statuses"] == 1)

            _ = try await client.getTransactionHistory(anyTransactionId: id, .init())
            let stats = client.statistics.snapshot
            #expect(stats.requests == 2)
            #expect(stats.rateLimited == 1)
            #expect(stats.failedCalls == 2)
        }
    }

    /// With a budget below the mock's limit, a burst of concurrency turns into waiting, not 429s
    /// (25 requests at once would exceed the limit). The limit is twice the budget: a loaded
    /// machine delays some requests and delivers them together.
    @Test func theBudgetKeepsABurstUnderTheLimit() async throws {
        try await MockAppStore.withRunning(.init(scenario: Self.scenario(customers: 30), rateLimitPerSecond: 20)) { mock, baseURL in
            let client = mock.client(baseURL: baseURL, requestsPerSecond: 10)
            let ids = Array(Set(mock.sentNotifications.compactMap(\.notification.transaction?.transactionId)).sorted().prefix(25))
            try await withThrowingTaskGroup(of: Void.self) { group in
                for id in ids { group.addTask { _ = try await client.getAllSubscriptionStatuses(anyTransactionId: id) } }
                try await group.waitForAll()
            }
            #expect(mock.statisticsSnapshot.rateLimited == 0)
            #expect(client.statistics.snapshot.requests == ids.count)
        }
    }
}

extension HTTPClientRequest {
    static func post(_ url: String) -> HTTPClientRequest {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        return request
    }
}
