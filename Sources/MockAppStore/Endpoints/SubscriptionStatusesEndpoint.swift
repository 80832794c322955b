import AppStoreServer
import Foundation
import NIOHTTP1

/// Get All Subscription Statuses: for the account, every subscription grouped by subscription
/// group, with its latest transaction, renewal info (both signed now) and status 1 to 5;
/// repeated `status` parameters filter.
extension MockAppStore {
    func subscriptionStatuses(_ request: MockHTTPRequest, anyTransactionId: String, in app: AppWorld) -> MockHTTPResponse {
        let (snapshot, account): (MockCatalog.Snapshot, String)
        switch customer(of: anyTransactionId, in: app) {
        case .success(let found): (snapshot, account) = found
        case .failure(let error): return error.response
        }
        var wanted: Set<Int32> = []
        for value in request.queryValues("status") {
            guard let status = Int32(value), (1...5).contains(status) else {
                return Self.apiError(.badRequest, 4_000_031, "Invalid status.")
            }
            wanted.insert(status)
        }
        let signedAt = Self.nowMilliseconds
        var groups: [String: [LastTransactionsItem]] = [:]
        do {
            for (original, latest) in snapshot.subscriptions(ofAccount: account) {
                let status = snapshot.world.subscriptionStatus[original] ?? .active
                if !wanted.isEmpty, !wanted.contains(status.rawValue) { continue }
                var transaction = latest
                transaction.signedDate = signedAt
                var renewal = snapshot.world.renewalVersions[original]?.last
                renewal?.signedDate = signedAt
                groups[latest.subscriptionGroupIdentifier ?? "", default: []].append(
                    LastTransactionsItem(
                        status: status, originalTransactionId: original, signedTransactionInfo: try app.catalog.signer.sign(transaction),
                        signedRenewalInfo: try renewal.map { try app.catalog.signer.sign($0) }))
            }
        } catch {
            return Self.apiError(.internalServerError, 5_000_000, "An unknown error occurred.")
        }
        let scenario = app.scenario
        return .json(
            .ok,
            StatusResponse(
                environment: scenario.environment, bundleId: scenario.bundleId, appAppleId: scenario.appAppleId,
                data: groups.sorted { $0.key < $1.key }.map {
                    SubscriptionGroupIdentifierItem(subscriptionGroupIdentifier: $0.key, lastTransactions: $0.value)
                }))
    }
}
