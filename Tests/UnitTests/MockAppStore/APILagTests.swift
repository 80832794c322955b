import AppStoreServer
import Foundation
import NIOHTTP1
import ReconcilerShared
import TestSupport
import Testing

@testable import MockAppStore

/// The mock's lag (`apiLagMilliseconds`, set over HTTP with `POST /mock/faults`): every read a
/// refresh or a repair makes serves the App Store as it was `lag` ago, consistently. The mock's
/// clock is the wall clock, so an event is "within the lag" or "past it" by where `now - lag`
/// falls: a refund made now is within a lag of an hour, and past a lag of 0, which is what an
/// hour's wait would make of it. No test waits.
@Suite struct APILagTests {
    /// What a customer's three reads show of one purchase: the latest transaction's revocation in
    /// Get All Subscription Statuses, with the status; the transaction in Get Transaction History;
    /// whether Get Notification History lists the REFUND notification `refund` (its UUID).
    struct Reads {
        var status: Status?
        var statusTransactionRevoked: Bool
        var historyTransactionRevoked: Bool
        var refundInNotificationHistory: Bool
    }

    static func reads(_ mock: MockAppStore, baseURL: String, original: String, latest: String, refund uuid: String?) async throws -> Reads {
        let client = mock.client(baseURL: baseURL)
        let verifier = try mock.verifier()
        let statuses = try await client.getAllSubscriptionStatuses(anyTransactionId: latest)
        let item = try #require(statuses.data?.flatMap { $0.lastTransactions ?? [] }.first { $0.originalTransactionId == original })
        let last = try await verifier.verifyAndDecodeTransaction(try #require(item.signedTransactionInfo))
        var historyRevoked: Bool?
        var request = TransactionHistoryRequest(sort: .ascending)
        while true {
            let page = try await client.getTransactionHistory(anyTransactionId: latest, request)
            for signed in page.signedTransactions ?? [] {
                let transaction = try await verifier.verifyAndDecodeTransaction(signed)
                if transaction.transactionId == latest { historyRevoked = transaction.revocationDate != nil }
            }
            guard page.hasMore == true else { break }
            request.revision = page.revision
        }
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        var refund = false
        for try await page in client.notificationHistory(.init(startDate: now - 24 * 3_600_000, endDate: now + 60_000, transactionId: latest)) {
            for signed in page.items.compactMap(\.signedPayload) {
                refund = try await verifier.verifyAndDecodeNotification(signed).notificationUUID == uuid || refund
            }
        }
        return Reads(
            status: item.status, statusTransactionRevoked: last.revocationDate != nil,
            historyTransactionRevoked: try #require(historyRevoked), refundInNotificationHistory: refund)
    }

    static func setLag(_ milliseconds: Int64, baseURL: String) async throws {
        let reply = try await HTTP.request(.POST, "\(baseURL)/mock/faults", body: Data("{\"apiLagMilliseconds\":\(milliseconds)}".utf8))
        #expect(reply.status == 200)
    }

    /// The history selects on `signedDate` here: on the first send attempt, 0.1 to 2 s after it, a
    /// refund made now would not be in the history yet, lag or not.
    @Test func aRefundWithinTheLagIsInNoReadAndPastItInEvery() async throws {
        var configuration = MockAppStore.Configuration(scenario: .init(seed: 39, customers: 8))
        configuration.scenario.historyDate = .signedDate
        try await MockAppStore.withRunning(configuration) { mock, baseURL in
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            let truth = mock.truth(at: now)
            let purchase = try #require(
                truth.first { $0.status == Status.active.rawValue && $0.revocationDate == nil && $0.latestTransactionId != nil })
            let (original, latest) = (purchase.originalTransactionId, purchase.latestTransactionId!)

            try await Self.setLag(3_600_000, baseURL: baseURL)
            let before = try await Self.reads(mock, baseURL: baseURL, original: original, latest: latest, refund: nil)
            #expect(before.status == .active)
            #expect(!before.statusTransactionRevoked && !before.historyTransactionRevoked && !before.refundInNotificationHistory)

            let refunded = try await HTTP.request(.POST, "\(baseURL)/mock/refund?transactionId=\(latest)")
            #expect(refunded.status == 200, "\(String(decoding: refunded.body, as: UTF8.self))")
            let uuid = try #require(refunded.json["notificationUUID"] as? String)
            #expect(mock.truth(at: Int64(Date().timeIntervalSince1970 * 1000)).first { $0.originalTransactionId == original }?.revocationDate != nil)

            // Within the lag: every read still serves the purchase as it was before the refund.
            let within = try await Self.reads(mock, baseURL: baseURL, original: original, latest: latest, refund: uuid)
            #expect(within.status == .active, "Get All Subscription Statuses' status lags")
            #expect(!within.statusTransactionRevoked, "Get All Subscription Statuses' last transaction lags")
            #expect(!within.historyTransactionRevoked, "Get Transaction History lags")
            #expect(!within.refundInNotificationHistory, "Get Notification History lags")

            // Past the lag: every read shows the refund.
            try await Self.setLag(0, baseURL: baseURL)
            let past = try await Self.reads(mock, baseURL: baseURL, original: original, latest: latest, refund: uuid)
            #expect(past.status == .revoked)
            #expect(past.statusTransactionRevoked && past.historyTransactionRevoked && past.refundInNotificationHistory)
        }
    }

    /// A generated event (the scenario's own history) lags the same way: with `now - lag` just
    /// before a subscription's last change of status, the statuses serve the status before it;
    /// just after it, the change.
    @Test func aScenarioChangeOfStatusLagsToo() async throws {
        try await MockAppStore.withRunning(.init(scenario: .init(seed: 39, customers: 8))) { mock, baseURL in
            let world = mock.simulatedWorlds[0].catalog.snapshot.world
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            // A subscription whose status changed at its last version, more than ten minutes ago.
            let changed = try #require(
                world.subscriptionVersions.sorted { $0.key < $1.key }.first { _, versions in
                    guard versions.count >= 2, let last = versions.last else { return false }
                    let previous = versions[versions.count - 2]
                    return previous.status != last.status && previous.modifiedAt < last.modifiedAt - 120_000 && last.modifiedAt < now - 600_000
                })
            let (original, versions) = changed
            let last = versions[versions.count - 1]
            let previous = versions[versions.count - 2]
            let client = mock.client(baseURL: baseURL)
            func status(lag: Int64) async throws -> Status? {
                try await Self.setLag(lag, baseURL: baseURL)
                let statuses = try await client.getAllSubscriptionStatuses(anyTransactionId: original)
                return statuses.data?.flatMap { $0.lastTransactions ?? [] }.first { $0.originalTransactionId == original }?.status
            }
            let at = Int64(Date().timeIntervalSince1970 * 1000)
            // `now - lag` a minute before the change, then a minute after it.
            #expect(try await status(lag: at - last.modifiedAt + 60_000) == previous.status)
            #expect(try await status(lag: at - last.modifiedAt - 60_000) == last.status)
            #expect(try await status(lag: 0) == world.subscriptionStatus[original])
        }
    }
}
