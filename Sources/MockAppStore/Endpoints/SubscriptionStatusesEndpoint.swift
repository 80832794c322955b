import AppStoreServer
import Foundation
import NIOHTTP1
import Synchronization

/// Get All Subscription Statuses: for the account, every subscription grouped by subscription
/// group, with its latest transaction, renewal info (both signed now) and status 1 to 5;
/// repeated `status` parameters filter. While the API lags (``FaultConfiguration/apiLagMilliseconds``),
/// each as it was that long ago, as Get Transaction History serves them.
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
        let lag = faults.withLock { $0.apiLagMilliseconds }
        var groups: [String: [LastTransactionsItem]] = [:]
        do {
            let entries = snapshot.transactions(ofAccount: account, lag: lag, now: signedAt)
            for (original, latest) in MockCatalog.Snapshot.subscriptions(in: entries) {
                var (status, renewal) = (snapshot.world.subscriptionStatus[original] ?? .active, snapshot.world.renewalVersions[original]?.last)
                if lag > 0 { (status, renewal) = snapshot.world.subscription(original, asOf: signedAt - lag) }
                if !wanted.isEmpty, !wanted.contains(status.rawValue) { continue }
                var transaction = latest
                transaction.signedDate = signedAt
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
