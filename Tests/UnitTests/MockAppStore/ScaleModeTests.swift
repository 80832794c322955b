import AppStoreServer
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOFoundationCompat
import ReconcilerShared
import TestSupport
import Testing

@testable import MockAppStore

/// The scale mode (`--scale-notifications`) serves from an index and rebuilds customers on
/// demand; these tests hold it to a plain scan of the whole scenario, built here from every
/// customer's world, so the index, the typed lists and the cursor must agree with Apple's
/// semantics as the default mode implements them.
@Suite struct ScaleModeTests {
    let now = Int64(Date().timeIntervalSince1970 * 1000)
    let hour: Int64 = 3_600_000

    var scenario: ScenarioConfiguration {
        var scenario = ScenarioConfiguration(
            seed: 5, customers: 0, now: now, outageStart: now - 25 * hour, outageEnd: now - hour,
            renewalPeriod: hour)
        scenario.scaleNotifications = 1_500
        return scenario
    }

    /// Every notification of the scenario with its first send attempt, in Apple's order.
    func reference(_ scale: ScaleScenario, customers: Int) -> [(plan: ScenarioWorld.PlannedNotification, firstAttempt: Int64)] {
        (0..<customers).flatMap { customer in
            scale.world(ofCustomer: customer).notifications.map { ($0, $0.signedDate + MockCatalog.firstAttemptDelay($0.notificationUUID)) }
        }
        .sorted { ($0.firstAttempt, $0.plan.notificationUUID) < ($1.firstAttempt, $1.plan.notificationUUID) }
    }

    func uuids(_ client: AppStoreServerAPIClient, _ request: NotificationHistoryRequest, _ verifier: SignedDataVerifier) async throws -> [String] {
        var result: [String] = []
        for try await page in client.notificationHistory(request) {
            #expect(page.items.count <= 20)
            for item in page.items { result.append(try await verifier.verifyAndDecodeNotification(item.signedPayload!).notificationUUID!) }
        }
        return result
    }

    /// The signer's and the generator's fast paths write what the slow ones wrote.
    @Test func fastEncodersWriteTheSameText() {
        var generator = SeededGenerator(seed: 3)
        for length in 0..<70 {
            let data = Data((0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) })
            #expect(JWSSigner.base64URL(data) == Base64URL.encode(data))
        }
        for _ in 0..<50 {
            var copy = generator
            var bytes = (0..<16).map { _ in UInt8.random(in: 0...255, using: &copy) }
            bytes[6] = (bytes[6] & 0x0F) | 0x40
            bytes[8] = (bytes[8] & 0x3F) | 0x80
            let expected = UUID(
                uuid: (
                    bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8], bytes[9],
                    bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
                )
            ).uuidString.lowercased()
            #expect(generator.uuid() == expected)
        }
    }

    @Test func customersAreRebuiltIdenticallyAndMostlyRenew() throws {
        let scale = try ScaleScenario(configuration: scenario)
        let a = scale.world(ofCustomer: 7), b = scale.world(ofCustomer: 7)
        #expect(a.notifications.map(\.notificationUUID) == b.notifications.map(\.notificationUUID))
        #expect(GroundTruth.purchases(a) == GroundTruth.purchases(b))
        let all = reference(scale, customers: 400)
        var kinds: [String: Int] = [:]
        for (plan, firstAttempt) in all {
            kinds[ScaleCatalog.kind(of: plan), default: 0] += 1
            // Everything is first sent inside the outage.
            #expect(firstAttempt >= scenario.outageStart! && firstAttempt < scenario.outageEnd!)
            if let transactionId = plan.transaction?.transactionId {
                #expect(ScaleScenario.customer(ofTransaction: transactionId) == Int(plan.accountId!.dropFirst("account-".count)))
            }
        }
        #expect(Double(kinds["DID_RENEW", default: 0]) > 0.7 * Double(all.count))
        for urgent in [
            "DID_RENEW/BILLING_RECOVERY", "EXPIRED/VOLUNTARY", "EXPIRED/BILLING_RETRY", "EXPIRED/PRICE_INCREASE",
            "EXPIRED/PRODUCT_NOT_FOR_SALE", "EXPIRED", "REFUND", "REVOKE", "GRACE_PERIOD_EXPIRED", "DID_FAIL_TO_RENEW",
            "DID_FAIL_TO_RENEW/GRACE_PERIOD", "SUBSCRIBED/INITIAL_BUY", "ONE_TIME_CHARGE",
        ] {
            #expect(kinds[urgent, default: 0] > 0, "\(urgent) missing")
        }
        #expect(ScaleScenario.customer(ofOrder: ScaleScenario.orderId(customer: 123_456, position: 7)) == 123_456)
    }

    @Test func historyPagesAgreeWithAScanOfEveryCustomer() async throws {
        try await MockAppStore.withRunning(.init(scenario: scenario)) { mock, baseURL in
            let scale = try #require(mock.scale)
            #expect(scale.entries.count >= 1_500)
            let all = reference(scale.scenario, customers: scale.customerCount)
            #expect(all.count == scale.entries.count)
            let client = mock.client(baseURL: baseURL)
            let verifier = try mock.verifier()
            let window = NotificationHistoryRequest(startDate: now - 30 * hour, endDate: now)
            #expect(try await uuids(client, window, verifier) == all.map(\.plan.notificationUUID))

            // A window inside: on the first send attempt, start included, end excluded.
            let from = all[300].firstAttempt, to = all[900].firstAttempt
            let inside = try await uuids(client, .init(startDate: from, endDate: to), verifier)
            #expect(inside == all.filter { $0.firstAttempt >= from && $0.firstAttempt < to }.map(\.plan.notificationUUID))

            // Typed queries: a type without a subtype returns only notifications without one.
            for (type, subtype) in [
                ("DID_RENEW", nil), ("DID_RENEW", "BILLING_RECOVERY"), ("EXPIRED", nil), ("EXPIRED", "VOLUNTARY"),
                ("REFUND", nil), ("TEST", nil),
            ] as [(String, String?)] {
                var request = window
                request.notificationType = NotificationTypeV2(rawValue: type)
                request.notificationSubtype = subtype.map(Subtype.init(rawValue:))
                let expected = all.filter { $0.plan.notificationType.rawValue == type && $0.plan.subtype?.rawValue == subtype }
                #expect(try await uuids(client, request, verifier) == expected.map(\.plan.notificationUUID), "\(type)/\(subtype ?? "")")
            }

            // The transactionId filter: any transaction of the customer names all its notifications.
            let customer = try #require(all.first { $0.plan.notificationType == .didRenew }?.plan.accountId)
            let mine = all.filter { $0.plan.accountId == customer }
            var request = window
            request.transactionId = try #require(mine.last?.plan.transaction?.transactionId)
            #expect(try await uuids(client, request, verifier) == mine.map(\.plan.notificationUUID))
            request.transactionId = "3000000000000000000"
            let unknown = await #expect(throws: AppStoreServerAPIError.self) { _ = try await client.getNotificationHistory(request) }
            #expect(unknown?.details.errorCode == .transactionIdNotFound)

            // The same notification is the same bytes on every page that returns it.
            let first = try await client.getNotificationHistory(window).notificationHistory?.map(\.signedPayload)
            let again = try await client.getNotificationHistory(window).notificationHistory?.map(\.signedPayload)
            #expect(first != nil && first == again)
            // The first notifications were retried 1 and 12 hours later, still inside the outage: every attempt failed.
            #expect(
                try await client.getNotificationHistory(window).notificationHistory?.allSatisfy {
                    $0.sendAttempts?.allSatisfy { $0.sendAttemptResult != .success } == true
                } == true)
        }
    }

    @Test func customerEndpointsAndTheTruthReadTheCustomersWorld() async throws {
        try await MockAppStore.withRunning(.init(scenario: scenario)) { mock, baseURL in
            let scale = try #require(mock.scale)
            // The truth is every customer's, in `reconciler export`'s order, `entitled` judged at the moment asked.
            var merged = ScenarioWorld()
            for customer in 0..<scale.customerCount {
                let world = scale.scenario.world(ofCustomer: customer)
                merged.transactionVersions.merge(world.transactionVersions) { a, _ in a }
                merged.renewalVersions.merge(world.renewalVersions) { a, _ in a }
                merged.subscriptionStatus.merge(world.subscriptionStatus) { a, _ in a }
                merged.notifications += world.notifications
            }
            let truth = scale.truth(at: now)
            #expect(truth == GroundTruth.purchases(merged, at: now))
            #expect(truth.map(\.originalTransactionId) == truth.map(\.originalTransactionId).sorted())
            #expect(truth.contains { $0.status != nil } && truth.contains { $0.entitled == true } && truth.contains { $0.entitled == false })
            #expect(try mock.truthJSONLines(at: now) == GroundTruth.jsonLines(merged, at: now))
            // `?at=` judges the same final facts at another moment: before the outage every subscription was still unexpired.
            let early = try await HTTPClient.shared.execute(
                HTTPClientRequest(url: "\(baseURL)/mock/truth?at=\(now - 30 * hour)"), timeout: .seconds(30))
            let earlyLines = String(buffer: try await early.body.collect(upTo: 1 << 26))
            #expect(earlyLines == (try GroundTruth.jsonLines(merged, at: now - 30 * hour)))
            #expect(earlyLines != (try mock.truthJSONLines(at: now)))

            let client = mock.client(baseURL: baseURL)
            let verifier = try mock.verifier()
            let world = scale.scenario.world(ofCustomer: 3)
            let anyTransaction = try #require(world.accounts.first?.transactionIds.last)
            var seen: [String] = []
            for try await page in client.transactionHistory(anyTransactionId: anyTransaction, .init(sort: .ascending)) {
                for signed in page.signedTransactions ?? [] { seen.append(try await verifier.verifyAndDecodeTransaction(signed).transactionId!) }
            }
            #expect(Set(seen) == Set(world.transactionVersions.keys))
            #expect(seen.count == world.transactionVersions.count)

            let order = try #require(mock.orders.first { $0.account == "account-3" })
            let found = try await client.lookUpOrderId(order.orderId)
            #expect(found.status == .valid)
            #expect(
                try await found.signedTransactions?.asyncMap { try await verifier.verifyAndDecodeTransaction($0).transactionId } == [
                    order.transactionId
                ])
        }
    }

    /// `GET /mock/notifications` lists the scale window too: every notification once, in Apple's
    /// order, none forged, delivered exactly when Get Notification History shows a successful attempt.
    @Test func notificationListMatchesTheHistory() async throws {
        try await MockAppStore.withRunning(.init(scenario: scenario)) { mock, baseURL in
            let scale = try #require(mock.scale)
            let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: "\(baseURL)/mock/notifications"), timeout: .seconds(30))
            let body = String(buffer: try await response.body.collect(upTo: 1 << 26))
            let lines = try body.split(separator: "\n").map { try JSONDecoder().decode(MockAppStore.NotificationLine.self, from: Data($0.utf8)) }
            let all = reference(scale.scenario, customers: scale.customerCount)
            #expect(lines.map(\.notificationUUID) == all.map(\.plan.notificationUUID))
            #expect(lines.map(\.firstAttemptDate) == all.map(\.firstAttempt))
            #expect(lines.map(\.subtype) == all.map { $0.plan.subtype?.rawValue })
            #expect(!lines.contains { $0.forged })
            // Nothing to deliver live: the one app's statistics say so too, as the total's do.
            #expect(mock.statisticsSnapshot.liveDeliveryComplete)
            #expect(mock.statisticsSnapshot.apps?.mapValues(\.liveDeliveryComplete) == [mock.primary.key.description: true])

            let client = mock.client(baseURL: baseURL)
            let verifier = try mock.verifier()
            var delivered: [String: Bool] = [:]
            for try await page in client.notificationHistory(NotificationHistoryRequest(startDate: now - 30 * hour, endDate: now)) {
                for item in page.items {
                    let uuid = try await verifier.verifyAndDecodeNotification(item.signedPayload!).notificationUUID!
                    delivered[uuid] = item.sendAttempts?.contains { $0.sendAttemptResult == .success } ?? false
                }
            }
            #expect(lines.map { delivered[$0.notificationUUID] } == lines.map(\.delivered))
            // The last hour's notifications were retried an hour later, after the outage: delivered late; the rest never.
            #expect(lines.contains { $0.delivered } && lines.contains { !$0.delivered })
        }
    }
}
