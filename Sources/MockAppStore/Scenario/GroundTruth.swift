package import AppStoreServer
import Foundation
package import ReconcilerShared

/// The final state of every purchase of a scenario, derived the way ``PurchaseState`` documents,
/// computed independently of the reconciler: this is what a correct reconciliation must export.
package enum GroundTruth {
    /// - Parameter now: the moment `entitled` is judged at, UNIX ms.
    package static func purchases(_ world: ScenarioWorld, at now: Int64 = Int64(Date().timeIntervalSince1970 * 1000)) -> [PurchaseState] {
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
            return PurchaseState(
                originalTransactionId: original, latestTransactionId: latest.transactionId, productId: latest.productId, bundleId: latest.bundleId,
                environment: latest.environment, purchaseDate: latest.purchaseDate, expiresDate: latest.expiresDate,
                revocationDate: latest.revocationDate, autoRenewStatus: renewal?.autoRenewStatus?.rawValue,
                lastSignedDate: lastSignedDate[original], appAccountToken: latest.appAccountToken,
                status: subscription ? world.subscriptionStatus[original]?.rawValue : nil,
                entitled: hasAccess(latest, renewal: subscription ? renewal : nil, terms: world.nonRenewingTerms, at: now),
                appTransactionId: latest.appTransactionId, revocationType: latest.revocationType?.rawValue,
                revocationPercentage: latest.revocationPercentage, offerType: latest.offerType?.rawValue, offerIdentifier: latest.offerIdentifier)
        }
        .sorted { $0.originalTransactionId < $1.originalTransactionId }
    }

    /// Whether the customer has access at `now`, as the App Store itself knows it, written apart
    /// from the reconciler's `Entitlement` so a comparison of the two can fail: a subscription
    /// while its period (or a billing grace period) runs, a season pass for its term from the
    /// purchase (the mock sold it, so it knows), a lifetime unlock for ever; never a consumable,
    /// never anything refunded or revoked. Billing retry alone gives no access (the reconciler's
    /// default).
    static func hasAccess(
        _ transaction: JWSTransactionDecodedPayload, renewal: JWSRenewalInfoDecodedPayload?, terms: [String: Int64], at now: Int64
    ) -> Bool {
        if transaction.revocationDate != nil { return false }
        if transaction.type == .autoRenewableSubscription {
            let periodRuns = (transaction.expiresDate ?? .min) > now
            let graceRuns = (renewal?.gracePeriodExpiresDate ?? .min) > now
            return periodRuns || graceRuns
        }
        if transaction.type == .nonRenewingSubscription {
            guard let term = terms[transaction.productId ?? ""], let bought = transaction.purchaseDate else { return false }
            return now < bought + term
        }
        return transaction.type == .nonConsumable
    }

    /// The latest transaction of a purchase: not upgraded first, then the newest purchaseDate,
    /// then the greatest transactionId.
    package static func latestTransaction(_ transactions: [JWSTransactionDecodedPayload]) -> JWSTransactionDecodedPayload {
        transactions.min { a, b in
            let aUpgraded = a.isUpgraded ?? false, bUpgraded = b.isUpgraded ?? false
            if aUpgraded != bUpgraded { return !aUpgraded }
            if (a.purchaseDate ?? Int64.min) != (b.purchaseDate ?? Int64.min) { return (a.purchaseDate ?? Int64.min) > (b.purchaseDate ?? Int64.min) }
            return (a.transactionId ?? "") > (b.transactionId ?? "")
        }!
    }

    /// The truth as JSON lines, in the shape of `reconciler export`.
    package static func jsonLines(_ world: ScenarioWorld, at now: Int64 = Int64(Date().timeIntervalSince1970 * 1000)) throws -> String {
        try purchases(world, at: now).map { try $0.jsonLine() + "\n" }.joined()
    }
}
