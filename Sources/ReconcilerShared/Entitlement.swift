/// Whether a customer has what they paid for, at a moment: the rule behind `entitled` in
/// `reconciler export` and the change feed, the same in the store and in the mock's ground truth.
///
/// - Nothing revoked (a refund or a family-sharing revoke) is entitled; a reversed refund clears
///   the revocation, so the purchase is entitled again.
/// - Auto-renewable subscriptions: while `expiresDate` is in the future, or a billing grace period
///   (`gracePeriodExpiresDate`) lasts, or, only when the app says so (`billingRetryEntitles`),
///   while Apple is still retrying the billing.
/// - Non-renewing subscriptions: until their `expiresDate` (forever without one).
/// - Non-consumables: always. Consumables: never (there is nothing to keep).
///
/// ```swift
/// let entitled = Entitlement.isEntitled(Entitlement.Facts(productType: "Auto-Renewable Subscription", expiresDate: e), at: now)
/// ```
public enum Entitlement {
    /// What the rule reads of a purchase.
    public struct Facts: Sendable, Hashable {
        /// Apple's `type`: "Auto-Renewable Subscription", "Non-Renewing Subscription", "Non-Consumable", "Consumable".
        public var productType: String?
        public var expiresDate: Int64?
        public var revocationDate: Int64?
        public var gracePeriodExpiresDate: Int64?
        public var isInBillingRetryPeriod: Bool?

        public init(
            productType: String?, expiresDate: Int64? = nil, revocationDate: Int64? = nil, gracePeriodExpiresDate: Int64? = nil,
            isInBillingRetryPeriod: Bool? = nil
        ) {
            self.productType = productType
            self.expiresDate = expiresDate
            self.revocationDate = revocationDate
            self.gracePeriodExpiresDate = gracePeriodExpiresDate
            self.isInBillingRetryPeriod = isInBillingRetryPeriod
        }
    }

    /// - Parameters:
    ///   - now: UNIX milliseconds.
    ///   - billingRetryEntitles: whether the app keeps access during Apple's billing retry.
    public static func isEntitled(_ facts: Facts, at now: Int64, billingRetryEntitles: Bool = false) -> Bool {
        guard facts.revocationDate == nil else { return false }
        switch facts.productType {
        case "Auto-Renewable Subscription":
            if let expires = facts.expiresDate, expires > now { return true }
            if let grace = facts.gracePeriodExpiresDate, grace > now { return true }
            return billingRetryEntitles && facts.isInBillingRetryPeriod == true
        case "Non-Renewing Subscription":
            return facts.expiresDate.map { $0 > now } ?? true
        case "Consumable":
            return false
        default:
            return true
        }
    }
}
