import AppStoreServer
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import TestSupport
import Testing

@testable import MockAppStore

/// Pins the mock to Apple's documented behaviour with a world built by hand, so every expectation
/// comes from the documentation and the hand-made data, not from the mock's own logic. Each test
/// fails if the behaviour it names is removed.
@Suite struct ConformanceTests {
    let now = Int64(Date().timeIntervalSince1970 * 1000)
    let hour: Int64 = 3_600_000

    /// A world with 51 known notifications: 3 DID_RENEW without subtype, 2 DID_RENEW/BILLING_RECOVERY,
    /// 1 EXPIRED/VOLUNTARY and 45 ONE_TIME_CHARGE; accounts A (subscription) and B (one-time purchases).
    func world() -> ScenarioWorld {
        var world = ScenarioWorld()
        world.accounts = [.init(id: "A", transactionIds: []), .init(id: "B", transactionIds: [])]
        func transaction(
            _ id: String, original: String, account: String, product: String, type: ProductType, at: Int64,
            modifiedAt: Int64? = nil, revoked: Bool = false
        ) -> JWSTransactionDecodedPayload {
            let payload = JWSTransactionDecodedPayload(
                originalTransactionId: original, transactionId: id, bundleId: "com.example.reconciler.mock", productId: product,
                subscriptionGroupIdentifier: type == .autoRenewableSubscription ? "21000001" : nil, purchaseDate: at,
                expiresDate: type == .autoRenewableSubscription ? at + 8 * hour : nil, type: type,
                inAppOwnershipType: .purchased, revocationDate: revoked ? at + hour : nil, environment: .production)
            world.transactionVersions[id, default: []].append(.init(payload: payload, modifiedAt: modifiedAt ?? at))
            world.accountOfTransaction[id] = account
            return payload
        }
        var plans: [ScenarioWorld.PlannedNotification] = []
        func notify(_ type: String, _ subtype: String?, at: Int64, account: String, _ payload: JWSTransactionDecodedPayload) {
            plans.append(
                .init(
                    notificationUUID: UUID().uuidString.lowercased(), notificationType: .init(rawValue: type),
                    subtype: subtype.map(Subtype.init(rawValue:)), signedDate: at, accountId: account,
                    originalTransactionId: payload.originalTransactionId, transaction: payload))
        }
        let base = now - 10 * hour
        for index in 0..<3 {
            notify(
                "DID_RENEW", nil, at: base + Int64(index) * hour, account: "A",
                transaction(
                    "100\(index)", original: "1000", account: "A", product: "com.example.premium.monthly",
                    type: .autoRenewableSubscription, at: base + Int64(index) * hour))
        }
        for index in 0..<2 {
            notify(
                "DID_RENEW", "BILLING_RECOVERY", at: base + Int64(3 + index) * hour, account: "A",
                transaction(
                    "101\(index)", original: "1000", account: "A", product: "com.example.premium.monthly",
                    type: .autoRenewableSubscription, at: base + Int64(3 + index) * hour, revoked: index == 1))
        }
        notify("EXPIRED", "VOLUNTARY", at: base + 6 * hour, account: "A", world.transactionVersions["1011"]!.last!.payload)
        for index in 0..<45 {
            let at = base + Int64(index) * 60_000
            notify(
                "ONE_TIME_CHARGE", nil, at: at, account: "B",
                transaction(
                    "20\(String(format: "%02d", index))", original: "20\(String(format: "%02d", index))", account: "B",
                    product: index % 2 == 0 ? "com.example.coins.100" : "com.example.lifetime",
                    type: index % 2 == 0 ? .consumable : .nonConsumable, at: at))
        }
        world.notifications = plans
        return world
    }

    var configuration: MockAppStore.Configuration {
        .init(scenario: .init(seed: 1, customers: 0, now: now, outageStart: nil, outageEnd: nil))
    }

    var window: NotificationHistoryRequest { .init(startDate: now - 24 * hour, endDate: now + hour) }

    /// API tokens signed with the key the mock accepts, for requests made by hand.
    func tokens(_ mock: MockAppStore, bundleId: String? = nil, lifetime: Duration = .seconds(20 * 60)) -> APIAuthenticationTokens {
        APIAuthenticationTokens(
            configuration: .init(
                privateKey: mock.apiKey, keyId: mock.configuration.keyId, issuerId: mock.configuration.issuerId,
                bundleId: bundleId ?? mock.configuration.scenario.bundleId, lifetime: lifetime))
    }

    func all(
        _ client: AppStoreServerAPIClient, _ request: NotificationHistoryRequest, _ verifier: SignedDataVerifier
    ) async throws -> [ResponseBodyV2DecodedPayload] {
        var result: [ResponseBodyV2DecodedPayload] = []
        for try await page in client.notificationHistory(request) {
            for item in page.items { result.append(try await verifier.verifyAndDecodeNotification(item.signedPayload!)) }
        }
        return result
    }

    @Test func aTypeWithoutSubtypeReturnsOnlyNotificationsWithoutSubtype() async throws {
        try await MockAppStore.withRunning(world: world(), configuration) { mock, baseURL in
            let client = mock.client(baseURL: baseURL)
            let verifier = try mock.verifier()
            var request = window
            request.notificationType = .didRenew
            let plain = try await all(client, request, verifier)
            #expect(plain.count == 3)
            #expect(plain.allSatisfy { $0.subtype == nil })
            request.notificationSubtype = .billingRecovery
            let recovery = try await all(client, request, verifier)
            #expect(recovery.count == 2)
            #expect(recovery.allSatisfy { $0.subtype == .billingRecovery })
            #expect(try await all(client, window, verifier).count == 51)
        }
    }

    @Test func pagesHoldTwentyOldestFirstWithHasMore() async throws {
        try await MockAppStore.withRunning(world: world(), configuration) { mock, baseURL in
            let client = mock.client(baseURL: baseURL)
            var sizes: [Int] = []
            var flags: [Bool] = []
            var dates: [Int64] = []
            for try await page in client.notificationHistory(window) {
                sizes.append(page.items.count)
                flags.append(page.hasMore)
                for item in page.items { dates.append(item.sendAttempts?.first?.attemptDate ?? 0) }
            }
            #expect(sizes == [20, 20, 11])
            #expect(flags == [true, true, false])
            #expect(dates == dates.sorted())
        }
    }

    @Test func filtersAreValidatedWithApplesErrorCodes() async throws {
        try await MockAppStore.withRunning(world: world(), configuration) { mock, baseURL in
            let client = mock.client(baseURL: baseURL)
            func code(_ request: NotificationHistoryRequest, token: String? = nil) async -> APIErrorCode? {
                do {
                    _ = try await client.getNotificationHistory(request, paginationToken: token)
                    return nil
                } catch let error as AppStoreServerAPIError { return error.details.errorCode } catch { return nil }
            }
            var both = window
            both.notificationType = .didRenew
            both.transactionId = "1000"
            #expect(await code(both) == .multipleFiltersSupplied)
            var orphanSubtype = window
            orphanSubtype.notificationSubtype = .voluntary
            #expect(await code(orphanSubtype) == .invalidNotificationType)
            var mismatched = window
            mismatched.notificationType = .didRenew
            mismatched.notificationSubtype = .voluntary
            #expect(await code(mismatched) == .invalidNotificationType)
            #expect(await code(.init(startDate: now - hour, endDate: now - 2 * hour)) == .startDateAfterEndDate)
            #expect(await code(.init(startDate: now - 181 * 24 * hour, endDate: now)) == .startDateTooFarInPast)
            #expect(await code(window, token: "garbage") == .invalidPaginationToken)
            var unknownTransaction = window
            unknownTransaction.transactionId = "424242"
            #expect(await code(unknownTransaction) == .transactionIdNotFound)
        }
    }

    @Test func theSandboxKeepsThirtyDays() async throws {
        var configuration = self.configuration
        configuration.scenario.environment = .sandbox
        try await MockAppStore.withRunning(world: ScenarioWorld(), configuration) { mock, baseURL in
            let client = mock.client(baseURL: baseURL)
            let error = await #expect(throws: AppStoreServerAPIError.self) {
                _ = try await client.getNotificationHistory(.init(startDate: now - 31 * 24 * hour, endDate: now))
            }
            #expect(error?.details.errorCode == .startDateTooFarInPast)
            _ = try await client.getNotificationHistory(.init(startDate: now - 29 * 24 * hour, endDate: now))
        }
    }

    @Test func aPaginationTokenIsBoundToItsRequestBody() async throws {
        try await MockAppStore.withRunning(world: world(), configuration) { mock, baseURL in
            let client = mock.client(baseURL: baseURL)
            let first = try await client.getNotificationHistory(window)
            let token = try #require(first.paginationToken)
            _ = try await client.getNotificationHistory(window, paginationToken: token)
            var changed = window
            changed.endDate -= 1
            let error = await #expect(throws: AppStoreServerAPIError.self) {
                _ = try await client.getNotificationHistory(changed, paginationToken: token)
            }
            guard case .paginationTokenExpired = error else {
                Issue.record("expected 4000017, got \(String(describing: error))")
                return
            }
        }
    }

    @Test func theWindowSelectsOnTheFirstSendAttempt() async throws {
        try await MockAppStore.withRunning(world: world(), configuration) { mock, baseURL in
            let client = mock.client(baseURL: baseURL)
            let target = try #require(mock.sentNotifications.first { $0.notification.notificationType == .expired })
            let signed = target.notification.signedDate
            #expect(target.firstAttemptDate > signed)
            // A window that ends between signing and the first attempt does not contain it.
            let before = try await all(client, .init(startDate: signed - hour, endDate: target.firstAttemptDate), try mock.verifier())
            #expect(!before.contains { $0.notificationUUID == target.notification.notificationUUID })
            let after = try await all(client, .init(startDate: target.firstAttemptDate, endDate: target.firstAttemptDate + 1), try mock.verifier())
            #expect(after.map(\.notificationUUID) == [target.notification.notificationUUID])
        }
    }

    /// `--history-date signed-date`: the window selects on `signedDate` and pages follow it, while
    /// each first send attempt comes 0 to 2 s after signing, so pages are not in first-attempt order.
    @Test func inSignedDateModeTheWindowAndThePagesFollowSignedDate() async throws {
        var world = ScenarioWorld()
        world.accounts = [.init(id: "B", transactionIds: [])]
        let base = now - 2 * hour
        world.notifications = (0..<30).map { index in
            let id = "30\(String(format: "%02d", index))", at = base + Int64(index) * 250
            let payload = JWSTransactionDecodedPayload(
                originalTransactionId: id, transactionId: id, bundleId: "com.example.reconciler.mock", productId: "com.example.coins.100",
                purchaseDate: at, type: .consumable, inAppOwnershipType: .purchased, environment: .production)
            world.transactionVersions[id] = [.init(payload: payload, modifiedAt: at)]
            world.accountOfTransaction[id] = "B"
            return .init(
                notificationUUID: UUID().uuidString.lowercased(), notificationType: .oneTimeCharge, subtype: nil, signedDate: at,
                accountId: "B", originalTransactionId: id, transaction: payload)
        }
        var configuration = self.configuration
        configuration.scenario.historyDate = .signedDate
        try await MockAppStore.withRunning(world: world, configuration) { mock, baseURL in
            let client = mock.client(baseURL: baseURL)
            let verifier = try mock.verifier()
            var signed: [Int64] = [], firstAttempts: [Int64] = []
            for try await page in client.notificationHistory(window) {
                for item in page.items {
                    signed.append(try #require(try await verifier.verifyAndDecodeNotification(item.signedPayload!).signedDate))
                    firstAttempts.append(try #require(item.sendAttempts?.compactMap(\.attemptDate).min()))
                }
            }
            #expect(signed == world.notifications.map(\.signedDate))
            #expect(zip(signed, firstAttempts).allSatisfy { $1 >= $0 && $1 <= $0 + 2_000 })
            #expect(firstAttempts != firstAttempts.sorted(), "the pages are in first-attempt order: this mode would show nothing")
            // A window one millisecond long at a notification's signing holds exactly that notification.
            let target = world.notifications[17]
            let one = try await all(client, .init(startDate: target.signedDate, endDate: target.signedDate + 1), verifier)
            #expect(one.map(\.notificationUUID) == [target.notificationUUID])
        }
    }

    @Test func onlyFailuresReturnsWhatNeverReachedTheServer() async throws {
        var configuration = self.configuration
        configuration.scenario.outageStart = now - 10 * hour - 1000
        configuration.scenario.outageEnd = now - 10 * hour + 30 * 60_000
        try await MockAppStore.withRunning(world: world(), configuration) { mock, baseURL in
            let client = mock.client(baseURL: baseURL)
            var request = window
            request.onlyFailures = true
            var failed: [NotificationHistoryResponseItem] = []
            for try await page in client.notificationHistory(request) { failed += page.items }
            // The coins bought in the first half hour; their first attempt failed, and Apple's
            // retry an hour later succeeded except for none (outage over), so they are delivered.
            let inOutage = mock.sentNotifications.filter { configuration.scenario.isInOutage($0.firstAttemptDate) }
            #expect(!inOutage.isEmpty)
            for item in failed {
                #expect(!(item.sendAttempts ?? []).contains { $0.sendAttemptResult == .success })
            }
            // Retried an hour later (production), after the outage: delivered, so not failures.
            #expect(failed.isEmpty)
            let attempts = mock.sendAttempts(notificationUUID: inOutage[0].notification.notificationUUID)
            #expect(attempts.count == 2)
            #expect(attempts.first?.sendAttemptResult != .success)
            #expect(attempts.last?.sendAttemptResult == .success)
            #expect(attempts[1].attemptDate! - attempts[0].attemptDate! == hour)
        }
    }

    /// Production retries 1 h after a failed attempt, then 12 h after the next one: a notification
    /// whose first two attempts fall in the outage has not reached the server yet, and Apple is
    /// still retrying it; one whose retry came after the outage was delivered.
    @Test func onlyFailuresFollowsApplesRetrySchedule() async throws {
        var configuration = self.configuration
        configuration.scenario.outageStart = now - 10 * hour - 1000
        configuration.scenario.outageEnd = now - 8 * hour - 30 * 60_000
        try await MockAppStore.withRunning(world: world(), configuration) { mock, baseURL in
            let client = mock.client(baseURL: baseURL)
            var request = window
            request.onlyFailures = true
            var failed: [NotificationHistoryResponseItem] = []
            for try await page in client.notificationHistory(request) { failed += page.items }
            let scenario = configuration.scenario
            let stillFailing = mock.sentNotifications.filter {
                scenario.isInOutage($0.firstAttemptDate) && scenario.isInOutage($0.firstAttemptDate + hour)
            }
            #expect(!failed.isEmpty)
            #expect(failed.count == stillFailing.count)
            for item in failed {
                #expect(item.sendAttempts?.count == 2)
                #expect(!(item.sendAttempts ?? []).contains { $0.sendAttemptResult == .success })
            }
        }
    }

    @Test func sandboxDoesNotRetryAndOnlyFailuresShowsIt() async throws {
        var configuration = self.configuration
        configuration.scenario.environment = .sandbox
        configuration.scenario.outageStart = now - 10 * hour - 1000
        configuration.scenario.outageEnd = now - 10 * hour + 30 * 60_000
        try await MockAppStore.withRunning(world: world(), configuration) { mock, baseURL in
            let client = mock.client(baseURL: baseURL)
            var request = window
            request.onlyFailures = true
            var failed = 0
            for try await page in client.notificationHistory(request) { failed += page.items.count }
            let inOutage = mock.sentNotifications.filter { configuration.scenario.isInOutage($0.firstAttemptDate) }
            #expect(failed == inOutage.count)
            #expect(failed > 0)
        }
    }

    @Test func transactionHistorySortsByModificationAndRevisionsReturnOnlyChanges() async throws {
        var world = world()
        // 1010 was modified (revoked) after 1011 was bought: ascending by modification puts it after.
        let revokedAt = now - hour
        var refunded = world.transactionVersions["1010"]!.last!.payload
        refunded.revocationDate = revokedAt
        world.transactionVersions["1010"]!.append(.init(payload: refunded, modifiedAt: revokedAt))
        try await MockAppStore.withRunning(world: world, configuration) { mock, baseURL in
            let client = mock.client(baseURL: baseURL)
            let verifier = try mock.verifier()
            let page = try await client.getTransactionHistory(anyTransactionId: "1001", .init(sort: .ascending))
            let ids = try await (page.signedTransactions ?? []).asyncMap { try await verifier.verifyAndDecodeTransaction($0).transactionId! }
            #expect(ids == ["1000", "1001", "1002", "1011", "1010"])
            let descending = try await client.getTransactionHistory(anyTransactionId: "1000", .init(sort: .descending))
            let reversed = try await (descending.signedTransactions ?? []).asyncMap {
                try await verifier.verifyAndDecodeTransaction($0).transactionId!
            }
            #expect(reversed == ids.reversed())
            let revoked = try await client.getTransactionHistory(anyTransactionId: "1000", .init(sort: .ascending, revoked: true))
            #expect(revoked.signedTransactions?.count == 2)
            let coins = try await client.getTransactionHistory(anyTransactionId: "2001", .init(productTypes: [.consumable], sort: .ascending))
            #expect(coins.signedTransactions?.count == 20)
            #expect(coins.hasMore == true)
            // Everything read: the revision returns nothing until something changes.
            var revision = page.revision
            let empty = try await client.getTransactionHistory(anyTransactionId: "1000", .init(revision: revision, sort: .ascending))
            #expect(empty.signedTransactions?.isEmpty == true)
            revision = empty.revision
            let error = await #expect(throws: AppStoreServerAPIError.self) {
                _ = try await client.getTransactionHistory(anyTransactionId: "1000", .init(revision: "made-up", sort: .ascending))
            }
            #expect(error?.details.errorCode == .invalidRequestRevision)
            let badType = await #expect(throws: AppStoreServerAPIError.self) {
                _ = try await client.getTransactionHistory(anyTransactionId: "1000", .init(productTypes: [.init(rawValue: "SUBSCRIPTION")]))
            }
            #expect(badType?.details.errorCode == .invalidProductType)
        }
    }

    /// `/mock/stats` counts each Get Notification History request by the filter its body carries
    /// and by the customer it names (`*`: none; `?`: a body that is not JSON, which gets 400).
    @Test func statisticsCountHistoryRequestsByFilterAndCustomer() async throws {
        try await MockAppStore.withRunning(world: world(), configuration) { mock, baseURL in
            let client = mock.client(baseURL: baseURL)
            func query(_ edit: (inout NotificationHistoryRequest) -> Void) async throws {
                var request = window
                edit(&request)
                _ = try await client.getNotificationHistory(request)
            }
            try await query { _ in }
            try await query { $0.notificationType = .didRenew }
            try await query {
                $0.notificationType = .didRenew
                $0.notificationSubtype = .billingRecovery
            }
            try await query { $0.transactionId = "1001" }
            var request = HTTPClientRequest(url: "\(baseURL)/inApps/v1/notifications/history")
            request.method = .POST
            request.headers.add(name: "Authorization", value: "Bearer \(try tokens(mock).token())")
            request.body = .bytes(ByteBuffer(string: "not json"))
            #expect(try await HTTPClient.shared.execute(request, timeout: .seconds(60)).status.code == 400)
            let statistics = mock.statisticsSnapshot
            #expect(statistics.historyRequestsByFilter == ["*": 1, "DID_RENEW": 1, "DID_RENEW/BILLING_RECOVERY": 1, "transactionId": 1, "?": 1])
            #expect(statistics.requestsByAccount == ["*": 4, "A": 1])
            #expect(statistics.apps?[mock.primary.key.description]?.historyRequestsByFilter == statistics.historyRequestsByFilter)
        }
    }

    @Test func everyRequestNeedsAValidJWT() async throws {
        try await MockAppStore.withRunning(world: world(), configuration) { mock, baseURL in
            var request = HTTPClientRequest(url: "\(baseURL)/inApps/v1/subscriptions/1000")
            let anonymous = try await HTTPClient.shared.execute(request, timeout: .seconds(60))
            #expect(anonymous.status.code == 401)
            let tooLong = tokens(mock, lifetime: .seconds(61 * 60))
            request.headers.add(name: "Authorization", value: "Bearer \(try tooLong.token())")
            #expect(try await HTTPClient.shared.execute(request, timeout: .seconds(60)).status.code == 401)
            let wrongBundle = tokens(mock, bundleId: "com.other")
            request.headers.replaceOrAdd(name: "Authorization", value: "Bearer \(try wrongBundle.token())")
            #expect(try await HTTPClient.shared.execute(request, timeout: .seconds(60)).status.code == 401)
            #expect(mock.statisticsSnapshot.unauthorized == 3)
        }
    }

    /// Two requests a second are allowed, the third in that second is refused with Apple's body and
    /// `Retry-After` in UNIX milliseconds. Before the second and the third request, one place of the
    /// window is taken by hand an hour ahead, so the third finds the window full however slow the
    /// machine is (a loaded machine can take more than a second between two requests).
    @Test func overTheLimitComes429WithRetryAfterInUNIXMilliseconds() async throws {
        var configuration = self.configuration
        configuration.rateLimitPerSecond = 2
        try await MockAppStore.withRunning(world: world(), configuration) { mock, baseURL in
            var request = HTTPClientRequest(url: "\(baseURL)/inApps/v1/subscriptions/1000")
            request.headers.add(name: "Authorization", value: "Bearer \(try tokens(mock).token())")
            var statuses: [UInt] = []
            var retryAfter: Int64?
            var body = ""
            let ahead = Int64(Date().timeIntervalSince1970 * 1000) + 3_600_000
            for index in 0..<3 {
                if index >= 1 { _ = mock.rateLimiter.decide(endpoint: "Get All Subscription Statuses", limit: 2, at: ahead) }
                let response = try await HTTPClient.shared.execute(request, timeout: .seconds(60))
                statuses.append(response.status.code)
                if response.status.code == 429 {
                    retryAfter = response.headers.first(name: "Retry-After").flatMap { Int64($0) }
                    body = String(buffer: try await response.body.collect(upTo: 4096))
                }
            }
            #expect(statuses == [200, 200, 429])
            // When the oldest request of the full second leaves it: UNIX milliseconds, not seconds.
            #expect(retryAfter == ahead + 1000)
            #expect(body.contains("4290000"))
        }
    }

    /// Not Apple's behaviour but what a proxy in front of it may do, on demand: `POST /mock/faults`
    /// switches every 429's `Retry-After` to delta-seconds or an HTTP-date, and injected 429s to a
    /// `Retry-After` far ahead.
    @Test func retryAfterFormsAndALongRetryAfterAreFaultSettings() async throws {
        try await MockAppStore.withRunning(world: world(), configuration) { mock, baseURL in
            var request = HTTPClientRequest(url: "\(baseURL)/inApps/v1/subscriptions/1000")
            request.headers.add(name: "Authorization", value: "Bearer \(try tokens(mock).token())")
            func retryAfter(faults: String) async throws -> (sentAt: Int64, value: String?) {
                var post = HTTPClientRequest(url: "\(baseURL)/mock/faults")
                post.method = .POST
                post.body = .bytes(ByteBuffer(string: faults))
                #expect(try await HTTPClient.shared.execute(post, timeout: .seconds(60)).status.code == 200)
                let sentAt = Int64(Date().timeIntervalSince1970 * 1000)
                let response = try await HTTPClient.shared.execute(request, timeout: .seconds(60))
                #expect(response.status.code == 429)
                return (sentAt, response.headers.first(name: "Retry-After"))
            }
            let delta = try await retryAfter(
                faults: #"{"rateLimitedRate": 1, "rateLimitedRetryAfterSeconds": 3600, "retryAfterFormat": "delta-seconds"}"#)
            #expect(delta.value == "3600")
            let dated = try await retryAfter(
                faults: #"{"rateLimitedRate": 1, "rateLimitedRetryAfterSeconds": 3600, "retryAfterFormat": "http-date"}"#)
            let date = try #require(dated.value.flatMap { RetryAfter(headerValue: $0) })
            #expect(date.form == .httpDate)
            #expect(date.unixMilliseconds >= dated.sentAt + 3_600_000)
            #expect(date.unixMilliseconds <= Int64(Date().timeIntervalSince1970 * 1000) + 3_601_000)
            let apples = try await retryAfter(faults: #"{"rateLimitedRate": 1, "rateLimitedRetryAfterSeconds": 3600}"#)
            #expect(apples.value.flatMap { Int64($0) }.map { $0 >= apples.sentAt + 3_600_000 } == true)

            var unknown = HTTPClientRequest(url: "\(baseURL)/mock/faults")
            unknown.method = .POST
            unknown.body = .bytes(ByteBuffer(string: #"{"retryAfterFormat": "minutes"}"#))
            #expect(try await HTTPClient.shared.execute(unknown, timeout: .seconds(60)).status.code == 400)
        }
    }

    /// The header says the instant the mock keeps for counting early requests, in every form:
    /// whole-second forms round up, so a client that obeys the header is never counted.
    @Test func theInstantKeptIsTheOneTheHeaderSays() throws {
        let sentAt: Int64 = 1_700_000_000_250
        for format in FaultConfiguration.RetryAfterFormat.allCases {
            let header = format.header(for: sentAt + 400, now: sentAt)
            let read = try #require(RetryAfter(headerValue: header.value, now: Date(timeIntervalSince1970: Double(sentAt) / 1000)))
            #expect(read.unixMilliseconds == header.announced, "\(format)")
            #expect(header.announced >= sentAt + 400, "\(format)")
        }
        #expect(FaultConfiguration.RetryAfterFormat.deltaSeconds.header(for: sentAt + 400, now: sentAt).value == "1")
        #expect(FaultConfiguration.RetryAfterFormat.httpDate.header(for: 784_111_776_500, now: 0).value == "Sun, 06 Nov 1994 08:49:37 GMT")

        // A request between the in-flight allowance and the announced instant is counted, not one before or after.
        let limiter = MockRateLimiter()
        let announced = FaultConfiguration.RetryAfterFormat.deltaSeconds.header(for: sentAt + 400, now: sentAt).announced
        limiter.announce(endpoint: "E", retryAfter: announced, at: sentAt)
        #expect(!limiter.decide(endpoint: "E", limit: 0, at: sentAt + 100).violatedRetryAfter)
        #expect(limiter.decide(endpoint: "E", limit: 0, at: sentAt + 700).violatedRetryAfter)
        #expect(!limiter.decide(endpoint: "E", limit: 0, at: sentAt + 1000).violatedRetryAfter)
    }

    /// Apple: the `transactionId` filter returns the notifications of the whole customer, every
    /// original transaction of the account, whichever of its transaction ids is given.
    @Test func theTransactionIdFilterCoversTheWholeCustomer() async throws {
        var world = world()
        // A notification without data belongs to no customer, so to no customer's history.
        world.notifications.append(
            .init(
                notificationUUID: UUID().uuidString.lowercased(), notificationType: .externalPurchaseToken, subtype: .unreported,
                signedDate: now - 9 * hour,
                externalPurchaseToken: ExternalPurchaseToken(
                    externalPurchaseId: UUID().uuidString, tokenCreationDate: now - 20 * hour,
                    appAppleId: 1_234_567_890, bundleId: "com.example.reconciler.mock")))
        try await MockAppStore.withRunning(world: world, configuration) { mock, baseURL in
            let client = mock.client(baseURL: baseURL)
            let verifier = try mock.verifier()
            var request = window
            // B's 45 one-time purchases are 45 original transactions: any one of them names them all.
            request.transactionId = "2003"
            let customerB = try await all(client, request, verifier)
            #expect(customerB.count == 45)
            let originals = try await customerB.asyncMap {
                try await verifier.verifyAndDecodeTransaction($0.data!.signedTransactionInfo!).originalTransactionId!
            }
            #expect(Set(originals).count == 45)
            // An older renewal of A names all six of A's notifications, as its original does.
            request.transactionId = "1001"
            let byRenewal = try await all(client, request, verifier).map(\.notificationUUID)
            request.transactionId = "1000"
            let byOriginal = try await all(client, request, verifier).map(\.notificationUUID)
            #expect(byRenewal.count == 6)
            #expect(byRenewal == byOriginal)
            #expect(try await all(client, window, verifier).count == 52)
        }
    }

    /// Look Up Order ID: 200 with status 0 and the order's transactions (newest version, signed
    /// at request time), or 200 with status 1 for any other order ID, malformed ones included.
    @Test func lookUpOrderIdFindsTheOrderAndAnswersStatusOneOtherwise() async throws {
        var world = world()
        world.orders = ["MQ5Q7X2ZYB": ["1011"], "K7P2M9X4QD": ["2000", "2002"]]
        try await MockAppStore.withRunning(world: world, configuration) { mock, baseURL in
            let client = mock.client(baseURL: baseURL)
            let verifier = try mock.verifier()
            let askedAt = Int64(Date().timeIntervalSince1970 * 1000)
            let found = try await client.lookUpOrderId("MQ5Q7X2ZYB")
            #expect(found.status == .valid)
            let transactions = try await (found.signedTransactions ?? []).asyncMap { try await verifier.verifyAndDecodeTransaction($0) }
            #expect(transactions.map(\.transactionId) == ["1011"])
            // 1011 was revoked: the newest version, signed now.
            #expect(transactions.first?.revocationDate != nil)
            #expect((transactions.first?.signedDate ?? 0) >= askedAt)
            let twoItems = try await client.lookUpOrderId("K7P2M9X4QD")
            let ids = try await (twoItems.signedTransactions ?? []).asyncMap { try await verifier.verifyAndDecodeTransaction($0).transactionId }
            #expect(ids == ["2000", "2002"])
            // Unknown, another case, too short, not an order ID at all, empty: status 1, never 4xx.
            for other in ["ZZZZZZZZZZ", "mq5q7x2zyb", "MQ5Q7X2ZY", "not an order/../1011", ""] {
                let answer = try await client.lookUpOrderId(other)
                #expect(answer.status == .invalid, "\(other)")
                #expect((answer.signedTransactions ?? []).isEmpty)
            }
            #expect(mock.statisticsSnapshot.unknownOrderIds == 5)
            #expect(client.statistics.snapshot.failedCalls == 0)
            // On the wire: exactly {"status":1}, and a JWT is required as everywhere.
            var request = HTTPClientRequest(url: "\(baseURL)/inApps/v1/lookup/ZZZZZZZZZZ")
            #expect(try await HTTPClient.shared.execute(request, timeout: .seconds(60)).status.code == 401)
            request.headers.add(name: "Authorization", value: "Bearer \(try tokens(mock).token())")
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(60))
            #expect(response.status.code == 200)
            #expect(String(buffer: try await response.body.collect(upTo: 4096)) == #"{"status":1}"#)
        }
    }

    /// Apple limits Look Up Order ID to 10 requests a second (1 in the sandbox), below the
    /// other endpoints, whatever limit the mock is given for those. The limiter's second is filled
    /// by hand at an instant an hour ahead (it stays in the window whatever the machine's speed),
    /// so exactly the last free slot is taken over HTTP, and the next request is refused.
    @Test(arguments: [(AppStoreEnvironment.production, 10), (.sandbox, 1)])
    func lookUpOrderIdIsLimitedToApplesTenPerSecond(_ environment: AppStoreEnvironment, _ limit: Int) async throws {
        var configuration = self.configuration
        configuration.scenario.environment = environment
        configuration.rateLimitPerSecond = 1000
        var world = world()
        world.orders = ["MQ5Q7X2ZYB": ["1011"]]
        try await MockAppStore.withRunning(world: world, configuration) { mock, baseURL in
            #expect(mock.limit(for: .lookUpOrderId) == Double(limit))
            #expect(mock.limit(for: .transactionHistory) == 1000)
            let ahead = Int64(Date().timeIntervalSince1970 * 1000) + 3_600_000
            func fill(_ count: Int) {
                for _ in 0..<count { _ = mock.rateLimiter.decide(endpoint: "Look Up Order ID", limit: mock.limit(for: .lookUpOrderId), at: ahead) }
            }
            var request = HTTPClientRequest(url: "\(baseURL)/inApps/v1/lookup/MQ5Q7X2ZYB")
            request.headers.add(name: "Authorization", value: "Bearer \(try tokens(mock).token())")
            fill(limit - 1)
            #expect(try await HTTPClient.shared.execute(request, timeout: .seconds(60)).status.code == 200)
            fill(1)
            let refused = try await HTTPClient.shared.execute(request, timeout: .seconds(60))
            #expect(refused.status.code == 429)
            #expect(refused.headers.first(name: "Retry-After") == String(ahead + 1000))
            #expect(String(buffer: try await refused.body.collect(upTo: 4096)).contains("4290000"))
            // Other endpoints keep their own budget.
            var statuses = HTTPClientRequest(url: "\(baseURL)/inApps/v1/subscriptions/1000")
            statuses.headers = request.headers
            #expect(try await HTTPClient.shared.execute(statuses, timeout: .seconds(60)).status.code == 200)
        }
    }

    /// Send Consumption Information (V2): 202 with no body for an answer Apple's rules accept, each
    /// rule's 400 with Apple's error code (the two Apple publishes no code for as 4000000 with their
    /// name), 404 for a transaction the app does not have, 401 without a JWT; only accepted answers
    /// are kept, with every field as sent.
    @Test func sendConsumptionInformationValidatesAsAppleDoes() async throws {
        var world = world()
        // 3000: a subscription shared through Family Sharing; 2000 also has an app transaction ID.
        let shared = JWSTransactionDecodedPayload(
            originalTransactionId: "3000", transactionId: "3000", bundleId: "com.example.reconciler.mock", productId: "com.example.premium.monthly",
            purchaseDate: now - hour, expiresDate: now + 7 * hour, type: .autoRenewableSubscription, inAppOwnershipType: .familyShared,
            environment: .production)
        world.transactionVersions["3000"] = [.init(payload: shared, modifiedAt: now - hour)]
        world.accountOfTransaction["3000"] = "A"
        world.transactionVersions["2000"]![0].payload.appTransactionId = "705000000000000001"
        try await MockAppStore.withRunning(world: world, configuration) { mock, baseURL in
            let client = mock.client(baseURL: baseURL)
            try await client.sendConsumptionInformation(
                transactionId: "2000",
                ConsumptionRequest(
                    customerConsented: true, deliveryStatus: .delivered, sampleContentProvided: true, consumptionPercentage: 25_000,
                    refundPreference: .grantProrated))
            try await client.sendConsumptionInformation(
                transactionId: "1000", ConsumptionRequest(customerConsented: true, deliveryStatus: .undeliveredOther, sampleContentProvided: false))

            let token = try tokens(mock).token()
            func put(_ transactionId: String, _ body: String, authorized: Bool = true) async throws -> (status: UInt, code: Int64?) {
                var request = HTTPClientRequest(url: "\(baseURL)/inApps/v2/transactions/consumption/\(transactionId)")
                request.method = .PUT
                if authorized { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
                request.headers.add(name: "Content-Type", value: "application/json")
                request.body = .bytes(ByteBuffer(string: body))
                let response = try await HTTPClient.shared.execute(request, timeout: .seconds(60))
                let bytes = try await response.body.collect(upTo: 65_536)
                return (response.status.code, (try? JSONDecoder().decode(ErrorPayload.self, from: Data(buffer: bytes)))?.errorCode)
            }
            let valid = #""customerConsented":true,"deliveryStatus":"DELIVERED","sampleContentProvided":false"#
            let cases: [(String, String, UInt, Int64?)] = [
                ("2000", #"{"customerConsented":false,"deliveryStatus":"DELIVERED","sampleContentProvided":false}"#, 400, 4_000_035),
                ("2000", #"{"deliveryStatus":"DELIVERED","sampleContentProvided":false}"#, 400, 4_000_035),
                ("2000", #"{"customerConsented":true,"deliveryStatus":"SHIPPED","sampleContentProvided":false}"#, 400, 4_000_036),
                ("2000", #"{"customerConsented":true,"deliveryStatus":"DELIVERED","sampleContentProvided":"yes"}"#, 400, 4_000_041),
                ("2000", "{\(valid),\"refundPreference\":\"MAYBE\"}", 400, 4_000_044),
                ("2000", "{\(valid),\"consumptionPercentage\":100001}", 400, 4_000_000),
                (
                    "2000",
                    #"{"customerConsented":true,"deliveryStatus":"UNDELIVERED_OTHER","sampleContentProvided":false,"consumptionPercentage":10}"#, 400,
                    4_000_000
                ),
                ("2000", "{\(valid),\"refundPreference\":\"GRANT_PRORATED\"}", 400, 4_000_000),
                ("1000", "{\(valid),\"consumptionPercentage\":0}", 400, 4_000_209),
                ("3000", "{\(valid)}", 400, 4_000_185),
                ("705000000000000001", "{\(valid)}", 400, 4_000_048),
                ("424242", "{\(valid)}", 404, 4_040_010),
                ("20x0", "{\(valid)}", 400, 4_000_006),
                ("2000", "not json", 400, nil),
            ]
            for (transactionId, body, status, code) in cases {
                let answer = try await put(transactionId, body)
                #expect(answer.status == status && answer.code == code, "\(transactionId) \(body): \(answer)")
            }
            #expect(try await put("2000", "{\(valid)}", authorized: false).status == 401)
            #expect(try await put("2001", "{\(valid),\"refundPreference\":\"GRANT_FULL\",\"consumptionPercentage\":100000}").status == 202)

            let received = mock.consumptionAnswerLines().split(separator: "\n").map {
                try? JSONDecoder().decode(MockAppStore.ReceivedConsumptionAnswer.self, from: Data($0.utf8))
            }
            #expect(received.map { $0?.transactionId } == ["2000", "1000", "2001"])
            let first = try #require(received.first ?? nil)
            #expect(first.deliveryStatus == "DELIVERED" && first.sampleContentProvided && first.refundPreference == "GRANT_PRORATED")
            #expect(first.consumptionPercentage == 25_000 && first.customerConsented && first.bundleId == "com.example.reconciler.mock")
            #expect(received.dropFirst().first??.consumptionPercentage == nil)
        }
    }

    /// Set App Account Token: the client's PUT (path and body) is answered 200 with no body; the
    /// token goes on the purchase's latest transaction (a new version: transaction history returns
    /// it again) and its renewal info, not on past transactions; each of Apple's errors for its case.
    @Test func setAppAccountTokenFollowsApplesRules() async throws {
        var world = world()
        let shared = JWSTransactionDecodedPayload(
            originalTransactionId: "3000", transactionId: "3000", bundleId: "com.example.reconciler.mock", productId: "com.example.lifetime",
            purchaseDate: now - hour, type: .nonConsumable, inAppOwnershipType: .familyShared, environment: .production)
        world.transactionVersions["3000"] = [.init(payload: shared, modifiedAt: now - hour)]
        world.accountOfTransaction["3000"] = "A"
        world.transactionVersions["2000"]![0].payload.appTransactionId = "705000000000000001"
        world.renewalVersions["1000"] = [
            JWSRenewalInfoDecodedPayload(originalTransactionId: "1000", productId: "com.example.premium.monthly", environment: .production)
        ]
        let token = "7e3fb20b-4cdb-47cc-936d-99d65f608138"
        try await MockAppStore.withRunning(world: world, configuration) { mock, baseURL in
            let client = mock.client(baseURL: baseURL)
            try await client.setAppAccountToken(originalTransactionId: "1000", UpdateAppAccountTokenRequest(appAccountToken: token))
            let verifier = try mock.verifier()
            var tokens: [String: String?] = [:]
            for try await page in client.transactionHistory(anyTransactionId: "1000", TransactionHistoryRequest()) {
                for signed in page.signedTransactions ?? [] {
                    let transaction = try await verifier.verifyAndDecodeTransaction(signed)
                    tokens[transaction.transactionId ?? ""] = transaction.appAccountToken
                }
            }
            #expect(tokens["1011"] == .some(token), "\(tokens)")
            #expect(["1000", "1001", "1002", "1010"].allSatisfy { tokens[$0] == .some(nil) }, "past transactions keep theirs: \(tokens)")
            let statuses = try await client.getAllSubscriptionStatuses(anyTransactionId: "1000")
            let renewal = try #require(statuses.data?.first?.lastTransactions?.first?.signedRenewalInfo)
            #expect(try await verifier.verifyAndDecodeRenewalInfo(renewal).appAccountToken == token)

            let jwt = try self.tokens(mock).token()
            func put(_ id: String, _ body: String) async throws -> (status: UInt, code: Int64?) {
                var request = HTTPClientRequest(url: "\(baseURL)/inApps/v1/transactions/\(id)/appAccountToken")
                request.method = .PUT
                request.headers.add(name: "Authorization", value: "Bearer \(jwt)")
                request.headers.add(name: "Content-Type", value: "application/json")
                request.body = .bytes(ByteBuffer(string: body))
                let response = try await HTTPClient.shared.execute(request, timeout: .seconds(60))
                let bytes = try await response.body.collect(upTo: 65_536)
                return (response.status.code, (try? JSONDecoder().decode(ErrorPayload.self, from: Data(buffer: bytes)))?.errorCode)
            }
            let valid = #"{"appAccountToken":"\#(token)"}"#
            let cases: [(String, String, UInt, Int64?)] = [
                ("20x0", valid, 400, 4_000_006),
                ("2000", #"{"appAccountToken":"not-a-uuid"}"#, 400, 4_000_183),
                ("2000", "{}", 400, 4_000_183),
                ("3000", valid, 400, 4_000_185),
                ("1011", valid, 400, 4_000_187),
                ("705000000000000001", valid, 400, 4_000_048),
                ("424242", valid, 404, 4_040_005),
                ("2000", "not json", 400, nil),
                ("2000", valid, 200, nil),
            ]
            for (id, body, status, code) in cases {
                let answer = try await put(id, body)
                #expect(answer.status == status && answer.code == code, "\(id) \(body): \(answer)")
            }
        }
    }

    @Test func statusesAreGroupedBySubscriptionGroup() async throws {
        var world = world()
        world.subscriptionStatus["1000"] = .expired
        try await MockAppStore.withRunning(world: world, configuration) { mock, baseURL in
            let client = mock.client(baseURL: baseURL)
            let response = try await client.getAllSubscriptionStatuses(anyTransactionId: "1002")
            #expect(response.data?.map(\.subscriptionGroupIdentifier) == ["21000001"])
            let item = try #require(response.data?.first?.lastTransactions?.first)
            #expect(item.status == .expired)
            #expect(item.originalTransactionId == "1000")
            let latest = try await mock.verifier().verifyAndDecodeTransaction(item.signedTransactionInfo!)
            #expect(latest.transactionId == "1011")
            let filtered = try await client.getAllSubscriptionStatuses(anyTransactionId: "1002", status: [.active])
            #expect(filtered.data?.isEmpty == true)
        }
    }
}
