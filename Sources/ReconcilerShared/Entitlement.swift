package import AppStoreServer
import Foundation

/// Whether a customer has what they paid for, at a moment: the rule behind `entitled` in
/// `reconciler export` and the change feed. `nil` means the reconciler cannot know.
///
/// - Nothing revoked (a refund or a family-sharing revoke) is entitled; a reversed refund clears
///   the revocation, so the purchase is entitled again.
/// - Auto-renewable subscriptions: while `expiresDate` is in the future, or a billing grace period
///   (`gracePeriodExpiresDate`) lasts, or, only when the app says so (`billingRetryEntitles`),
///   while Apple is still retrying the billing.
/// - Non-renewing subscriptions: Apple sends no `expiresDate` for them; the app decides how long
///   each product lasts. With a term configured for the product (``EntitlementPolicy/nonRenewingTerms``),
///   until `purchaseDate` + term; else until an `expiresDate` if one was sent; else unknown (`nil`).
/// - Non-consumables: always. Consumables: never (there is nothing to keep).
/// - A product type that is missing or that this version does not know: never, by default.
/// - Sandbox purchases (TestFlight, App Review) as production ones, unless the app says they do
///   not entitle (``EntitlementPolicy/sandboxEntitles``).
///
/// ```swift
/// let policy = EntitlementPolicy(nonRenewingTerms: ["com.example.pass.30d": 30 * 86_400_000])
/// let entitled = Entitlement.isEntitled(.init(productType: "Non-Renewing Subscription", productId: "com.example.pass.30d", purchaseDate: p), at: now, policy: policy)
/// ```
package enum Entitlement {
    /// What the rule reads of a purchase.
    package struct Facts: Sendable, Hashable {
        /// Apple's `type`: "Auto-Renewable Subscription", "Non-Renewing Subscription", "Non-Consumable", "Consumable".
        package var productType: String?
        package var productId: String?
        /// `Sandbox` or `Production`: sandbox purchases (TestFlight, App Review) entitle only when the app says so.
        package var environment: AppStoreEnvironment?
        package var purchaseDate: Int64?
        package var expiresDate: Int64?
        package var revocationDate: Int64?
        package var gracePeriodExpiresDate: Int64?
        package var isInBillingRetryPeriod: Bool?

        package init(
            productType: String?, productId: String? = nil, environment: AppStoreEnvironment? = nil, purchaseDate: Int64? = nil,
            expiresDate: Int64? = nil,
            revocationDate: Int64? = nil, gracePeriodExpiresDate: Int64? = nil, isInBillingRetryPeriod: Bool? = nil
        ) {
            self.productType = productType
            self.productId = productId
            self.environment = environment
            self.purchaseDate = purchaseDate
            self.expiresDate = expiresDate
            self.revocationDate = revocationDate
            self.gracePeriodExpiresDate = gracePeriodExpiresDate
            self.isInBillingRetryPeriod = isInBillingRetryPeriod
        }
    }

    /// - Parameters:
    ///   - now: when the purchase is judged.
    ///   - policy: the app's choices (billing retry, non-renewing terms).
    /// - Returns: whether the purchase entitles now, or `nil` when that cannot be known (a
    ///   non-renewing subscription whose term the app did not configure).
    package static func isEntitled(_ facts: Facts, at time: Timestamp, policy: EntitlementPolicy = .init()) -> Bool? {
        // Apple's dates, as the facts hold them, are UNIX milliseconds.
        let now = time.millisecondsSince1970
        guard facts.revocationDate == nil else { return false }
        if facts.environment == .sandbox, !policy.sandboxEntitles { return false }
        switch facts.productType {
        case "Auto-Renewable Subscription":
            if let expires = facts.expiresDate, expires > now { return true }
            if let grace = facts.gracePeriodExpiresDate, grace > now { return true }
            return policy.billingRetryEntitles && facts.isInBillingRetryPeriod == true
        case "Non-Renewing Subscription":
            if let term = facts.productId.flatMap({ policy.nonRenewingTerms[$0] }), let purchased = facts.purchaseDate {
                return purchased + term > now
            }
            return facts.expiresDate.map { $0 > now }
        case "Non-Consumable":
            return true
        default:
            // Consumables, and a type this version does not know: nothing to keep.
            return false
        }
    }
}

/// What the app decides about entitlement that Apple's data does not say.
package struct EntitlementPolicy: Sendable, Hashable, Codable {
    /// Whether a subscription in Apple's billing retry still entitles (env RECONCILER_ENTITLE_BILLING_RETRY).
    package var billingRetryEntitles: Bool
    /// How long each non-renewing subscription lasts from its purchase, by product ID, in
    /// milliseconds (env RECONCILER_NON_RENEWING_TERMS, e.g. `com.example.pass.30d=30d`).
    package var nonRenewingTerms: [String: Int64]
    /// Whether sandbox purchases (TestFlight, App Review) entitle; default yes, so testers and
    /// Apple's reviewers get what they bought.
    package var sandboxEntitles: Bool

    package init(billingRetryEntitles: Bool = false, nonRenewingTerms: [String: Int64] = [:], sandboxEntitles: Bool = true) {
        self.billingRetryEntitles = billingRetryEntitles
        self.nonRenewingTerms = nonRenewingTerms
        self.sandboxEntitles = sandboxEntitles
    }

    /// Parses `PRODUCT=DURATION[,PRODUCT=DURATION...]` (durations as `Duration(parsing:)`
    /// reads them: 30d, 12h, 90m); `nil` when an entry is not of that form.
    package static func parseTerms(_ text: String) -> [String: Int64]? {
        var terms: [String: Int64] = [:]
        for entry in text.split(separator: ",") {
            let parts = entry.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard parts.count == 2, !parts[0].isEmpty, let duration = Duration(parsing: parts[1]), duration > .zero else { return nil }
            terms[parts[0]] = duration.milliseconds
        }
        return terms
    }

    /// The terms as `parseTerms` reads them, sorted by product ID.
    package static func formatTerms(_ terms: [String: Int64]) -> String {
        terms.keys.sorted().map { "\($0)=\(Duration.milliseconds(terms[$0]!).operatorText)" }.joined(separator: ",")
    }
}
