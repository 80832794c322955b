package import AppStoreServer
import Foundation
package import ReconcilerShared
import Synchronization

/// What the app's own database holds about its customers: a transaction ID and its own user ID
/// for each, the list `reconciler import` reads. The mock lists the customers a new deployment
/// cannot learn of from Apple's notifications (their last activity older than the history's
/// retention: ``ScenarioConfiguration/dormantCustomers``), and once it has listed them its truth
/// carries their `appUserId` on every purchase, as an import of the list gives it.
extension MockAppStore {
    /// An account the identifiers list named, in its app and environment.
    struct ListedAccount: Hashable, Sendable {
        var key: AppKey
        var account: String
    }

    /// The app's own ID for an account (`user-production-account-3`): unique across the app's environments.
    package static func appUserId(account: String, environment: AppStoreEnvironment) -> String {
        "user-\(environment.rawValue.lowercased())-\(account)"
    }

    /// The identifiers list of one app (`bundleId`; `nil`: every app) as CSV with a header,
    /// `transactionId,appUserId`, one row per customer whose every transaction was last changed
    /// before the notification history's retention began (its first transaction ID), by app,
    /// environment and account. Listing them makes the truth carry their appUserId.
    package func identifiersCSV(bundleId: String? = nil) -> String {
        var lines = ["transactionId,appUserId"]
        var listed: [ListedAccount] = []
        for world in simulatedWorlds where world.scale == nil && (bundleId == nil || world.key.bundleId == bundleId) {
            let snapshot = world.catalog.snapshot.world
            let horizon = world.scenario.now - world.scenario.historyRetention
            for account in snapshot.accounts {
                let changes = account.transactionIds.compactMap { snapshot.transactionVersions[$0]?.last?.modifiedAt }
                guard let first = account.transactionIds.first, !changes.isEmpty, changes.allSatisfy({ $0 < horizon }) else { continue }
                lines.append("\(first),\(Self.appUserId(account: account.id, environment: world.key.environment))")
                listed.append(ListedAccount(key: world.key, account: account.id))
            }
        }
        listedAccounts.withLock { $0.formUnion(listed) }
        return lines.joined(separator: "\n") + "\n"
    }

    /// The truth of one world with the appUserId of each listed account's purchases.
    func withAppUserIds(_ purchases: [PurchaseState], of world: AppWorld) -> [PurchaseState] {
        let listed = listedAccounts.withLock { $0 }
        guard !listed.isEmpty else { return purchases }
        let accounts = world.catalog.snapshot.world.accountOfTransaction
        return purchases.map { state in
            guard let account = accounts[state.originalTransactionId], listed.contains(ListedAccount(key: world.key, account: account)) else {
                return state
            }
            var state = state
            state.appUserId = Self.appUserId(account: account, environment: world.key.environment)
            return state
        }
    }
}
