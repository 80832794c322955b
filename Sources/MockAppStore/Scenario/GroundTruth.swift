import AppStoreServer
import Foundation
import ReconcilerShared

/// The final state of every purchase of a scenario, derived the way ``PurchaseState`` documents,
/// computed independently of the reconciler: this is what a correct reconciliation must export.
public enum GroundTruth {
    /// - Parameter now: the moment `entitled` is judged at, UNIX ms.
    public static func purchases(_ world: ScenarioWorld, at now: Int64 = Int64(Date().timeIntervalSince1970 * 1000)) -> [PurchaseState] {
        var byOriginal: [String: [JWSTransactionDecodedPayload]] = [:]
        for (_, versions) in world.transactionVersions {
            guard let newest = versions.last?.payload, let original = newest.originalTransactionId else { continue }
            byOriginal[original, default: []].append(newest)
        }
        var lastSignedDate: [String: Int64] = [:]
        for notification in world.notifications {
            guard let original = notification.originalTransactionId else { continue }
            lastSignedDate[original] = max(lastSignedDate[original] ?? Int64.min, notification.signedDate)
        }
        return byOriginal.map { original, transactions in
            let latest = latestTransaction(transactions)
            let renewal = world.renewalVersions[original]?.last
            let subscription = latest.type == .autoRenewableSubscription
            let facts = Entitlement.Facts(
                productType: latest.type?.rawValue, expiresDate: latest.expiresDate, revocationDate: latest.revocationDate,
                gracePeriodExpiresDate: subscription ? renewal?.gracePeriodExpiresDate : nil,
                isInBillingRetryPeriod: subscription ? renewal?.isInBillingRetryPeriod : nil)
            return PurchaseState(
                originalTransactionId: original, latestTransactionId: latest.transactionId, productId: latest.productId,
                environment: latest.environment?.rawValue, purchaseDate: latest.purchaseDate, expiresDate: latest.expiresDate,
                revocationDate: latest.revocationDate, autoRenewStatus: renewal?.autoRenewStatus?.rawValue,
                lastSignedDate: lastSignedDate[original], appAccountToken: latest.appAccountToken,
                status: subscription ? world.subscriptionStatus[original]?.rawValue : nil,
                entitled: Entitlement.isEntitled(facts, at: now))
        }
        .sorted { $0.originalTransactionId < $1.originalTransactionId }
    }

    /// The latest transaction of a purchase: not upgraded first, then the newest purchaseDate,
    /// then the greatest transactionId.
    public static func latestTransaction(_ transactions: [JWSTransactionDecodedPayload]) -> JWSTransactionDecodedPayload {
        transactions.min { a, b in
            let aUpgraded = a.isUpgraded ?? false, bUpgraded = b.isUpgraded ?? false
            if aUpgraded != bUpgraded { return !aUpgraded }
            if (a.purchaseDate ?? Int64.min) != (b.purchaseDate ?? Int64.min) { return (a.purchaseDate ?? Int64.min) > (b.purchaseDate ?? Int64.min) }
            return (a.transactionId ?? "") > (b.transactionId ?? "")
        }!
    }

    /// The truth as JSON lines, in the shape of `reconciler export`.
    public static func jsonLines(_ world: ScenarioWorld, at now: Int64 = Int64(Date().timeIntervalSince1970 * 1000)) throws -> String {
        try purchases(world, at: now).map { try $0.jsonLine() + "\n" }.joined()
    }
}
