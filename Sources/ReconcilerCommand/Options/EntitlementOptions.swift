import ArgumentParser
import ReconcilerDomain
import ReconcilerShared

/// The app's entitlement choices from the environment: RECONCILER_ENTITLE_BILLING_RETRY (1 when a
/// subscription in Apple's billing retry still entitles) and RECONCILER_NON_RENEWING_TERMS
/// (`PRODUCT=DURATION,...`, how long each non-renewing subscription lasts).
enum EntitlementOptions {
    /// - Parameters:
    ///   - entitleBillingRetry: a command's own flag, added to the environment's choice.
    ///   - terms: a command's own `PRODUCT=DURATION` options, over the environment's.
    static func policy(entitleBillingRetry: Bool = false, terms: [String] = []) throws -> EntitlementPolicy {
        var policy = EntitlementPolicy(billingRetryEntitles: entitleBillingRetry || Env.flag("RECONCILER_ENTITLE_BILLING_RETRY"))
        if let text = Env.value("RECONCILER_NON_RENEWING_TERMS") {
            guard let parsed = EntitlementPolicy.parseTerms(text) else {
                throw ReconcilerError.configuration(
                    "RECONCILER_NON_RENEWING_TERMS: \(text) is not a list of PRODUCT=DURATION (e.g. com.example.pass.30d=30d,com.example.pass.7d=7d)")
            }
            policy.nonRenewingTerms = parsed
        }
        policy.nonRenewingTerms.merge(try self.terms(terms)) { $1 }
        return policy
    }

    /// A configured app's choices (its configuration file's or the environment's), with a
    /// command's own flags added.
    static func policy(_ base: EntitlementPolicy, entitleBillingRetry: Bool, terms: [String]) throws -> EntitlementPolicy {
        var policy = base
        policy.billingRetryEntitles = policy.billingRetryEntitles || entitleBillingRetry
        policy.nonRenewingTerms.merge(try self.terms(terms)) { $1 }
        return policy
    }

    /// `--non-renewing-term PRODUCT=DURATION` options.
    private static func terms(_ terms: [String]) throws -> [String: Int64] {
        var result: [String: Int64] = [:]
        for term in terms {
            guard let parsed = EntitlementPolicy.parseTerms(term), parsed.count == 1 else {
                throw ReconcilerError.configuration("--non-renewing-term: \(term) is not PRODUCT=DURATION (e.g. com.example.pass.30d=30d)")
            }
            result.merge(parsed) { $1 }
        }
        return result
    }
}
