import AppStoreServer
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import TestSupport
import Testing

@testable import MockAppStore

/// The payloads without `data` over real HTTP, in both environments' conventions: served by
/// Get Notification History live and inside the outage, and accepted by the verifier.
@Suite struct PayloadKindsTests {
    static let kinds: Set<String> = [
        "RENEWAL_EXTENSION/SUMMARY", "EXTERNAL_PURCHASE_TOKEN/CREATED", "EXTERNAL_PURCHASE_TOKEN/ACTIVE_TOKEN_REMINDER",
        "EXTERNAL_PURCHASE_TOKEN/UNREPORTED", "RESCIND_CONSENT",
    ]

    func scenario(_ environment: AppStoreEnvironment) -> ScenarioConfiguration {
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        return ScenarioConfiguration(
            seed: 5, customers: 8, now: now, span: 86_400_000, outageStart: now - 6 * 3_600_000,
            outageEnd: now - 3 * 3_600_000, environment: environment)
    }

    @Test(arguments: [AppStoreEnvironment.production, .sandbox])
    func everyKindWithoutDataIsServedLiveAndInTheOutageAndVerifies(_ environment: AppStoreEnvironment) async throws {
        let scenario = scenario(environment)
        try await MockAppStore.withRunning(.init(scenario: scenario)) { mock, baseURL in
            let client = mock.client(baseURL: baseURL)
            let verifier = try mock.verifier()
            var live: Set<String> = []
            var inOutage: Set<String> = []
            let request = NotificationHistoryRequest(startDate: scenario.start - 60_000, endDate: scenario.now + 60_000)
            for try await page in client.notificationHistory(request) {
                for item in page.items {
                    let notification = try await verifier.verifyAndDecodeNotification(item.signedPayload ?? "")
                    let firstAttempt = try #require(item.sendAttempts?.first)
                    guard notification.data == nil else {
                        // The data convention: no appAppleId in the sandbox.
                        #expect((notification.data?.appAppleId != nil) == (environment == .production))
                        continue
                    }
                    let kind = notification.subtype.map { "\(notification.notificationType!)/\($0)" } ?? "\(notification.notificationType!)"
                    if scenario.isInOutage(firstAttempt.attemptDate ?? 0) {
                        #expect(firstAttempt.sendAttemptResult != .success)
                        inOutage.insert(kind)
                    } else {
                        #expect(firstAttempt.sendAttemptResult == .success)
                        live.insert(kind)
                    }
                    #expect(notification.appIdentity.environment == environment)
                    #expect(notification.appIdentity.bundleId == scenario.bundleId)
                    switch notification.notificationType {
                    case .renewalExtension?:
                        let summary = try #require(notification.summary)
                        #expect(summary.environment == environment && summary.appAppleId == scenario.appAppleId)
                        #expect(summary.requestIdentifier != nil && summary.succeededCount == 0 && summary.failedCount == 0)
                    case .externalPurchaseToken?:
                        let token = try #require(notification.externalPurchaseToken)
                        // The token has no environment: a sandbox token's id starts with SANDBOX.
                        #expect(token.externalPurchaseId?.hasPrefix("SANDBOX") == (environment == .sandbox))
                        #expect(token.appAppleId == scenario.appAppleId && token.tokenCreationDate != nil)
                        if notification.subtype != .unreported {
                            #expect(token.tokenType != nil && token.tokenExpirationDate != nil)
                        }
                    case .rescindConsent?:
                        let appData = try #require(notification.appData)
                        #expect((appData.appAppleId != nil) == (environment == .production))
                        let appTransaction = try await verifier.verifyAndDecodeAppTransaction(try #require(appData.signedAppTransactionInfo))
                        #expect(appTransaction.receiptType == environment)
                        #expect(appTransaction.receiptCreationDate == notification.signedDate)
                        #expect(appTransaction.appTransactionId?.hasPrefix("70") == true)
                    default:
                        Issue.record("unexpected kind without data: \(kind)")
                    }
                }
            }
            #expect(live == Self.kinds)
            #expect(inOutage == Self.kinds)
        }
    }

    /// `GET /mock/orders` lists every transaction's order ID; each one is found by Look Up Order ID;
    /// `GET /mock/truth` keeps its shape (one purchase per line, as `reconciler export`).
    @Test func theOrdersEndpointListsOrdersThatLookUpOrderIdFinds() async throws {
        try await MockAppStore.withRunning(.init(scenario: scenario(.production))) { mock, baseURL in
            let client = mock.client(baseURL: baseURL)
            let verifier = try mock.verifier()
            let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: "\(baseURL)/mock/orders"), timeout: .seconds(60))
            #expect(response.status.code == 200)
            let body = String(buffer: try await response.body.collect(upTo: 1 << 24))
            let orders = try body.split(separator: "\n").map { try JSONDecoder().decode(MockOrder.self, from: Data($0.utf8)) }
            #expect(orders == mock.orders)
            #expect(orders.count == mock.catalog.snapshot.world.transactionVersions.count)
            let purchase = orders.first { $0.transactionId == $0.originalTransactionId }
            let renewal = orders.last { $0.transactionId != $0.originalTransactionId }
            for order in [purchase, renewal] {
                let order = try #require(order)
                let answer = try await client.lookUpOrderId(order.orderId)
                #expect(answer.status == .valid)
                let transactions = try await (answer.signedTransactions ?? []).asyncMap { try await verifier.verifyAndDecodeTransaction($0) }
                #expect(transactions.map(\.transactionId) == [order.transactionId])
                #expect(transactions.first?.originalTransactionId == order.originalTransactionId)
            }
            let truth = try await HTTPClient.shared.execute(HTTPClientRequest(url: "\(baseURL)/mock/truth"), timeout: .seconds(60))
            #expect(String(buffer: try await truth.body.collect(upTo: 1 << 24)) == (try mock.truthJSONLines()))
            #expect(try mock.truthJSONLines().split(separator: "\n").count == mock.truth.count)
        }
    }
}
