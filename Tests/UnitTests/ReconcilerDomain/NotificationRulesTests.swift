import AppStoreServer
import ReconcilerDomain
import ReconcilerShared
import Testing

/// The one table of what each notification type means: every reader agrees with it, and the
/// table itself has no entry a run could never use.
@Suite struct NotificationRulesTests {
    /// The planner's default order is the table's, subtypes included, exactly as it was written
    /// out by hand before the table.
    @Test func thePlannersDefaultOrderIsTheTables() {
        #expect(
            ReplayPlanner.defaultPriority.map(\.description) == [
                "CONSUMPTION_REQUEST", "DID_RENEW", "DID_RENEW/BILLING_RECOVERY", "EXPIRED/VOLUNTARY", "EXPIRED/BILLING_RETRY",
                "EXPIRED/PRICE_INCREASE", "EXPIRED/PRODUCT_NOT_FOR_SALE", "EXPIRED", "REFUND", "REVOKE", "GRACE_PERIOD_EXPIRED",
                "DID_FAIL_TO_RENEW", "DID_FAIL_TO_RENEW/GRACE_PERIOD",
            ])
    }

    /// A type with typed queries is in the query order (else its queries would never be asked),
    /// each type once; and the order lists no type without queries.
    @Test func everyTypedQueryIsAskedAndEveryQueriedTypeHasQueries() {
        let withQueries = Set(NotificationRules.table.filter { !$0.value.typedQueries.isEmpty }.keys)
        #expect(Set(NotificationRules.queryOrder) == withQueries)
        #expect(Set(NotificationRules.queryOrder).count == NotificationRules.queryOrder.count)
    }

    /// The rules each reader takes: TEST applies to no purchase, a reversed refund clears the
    /// revocation, a consumption request is due 12 hours after its first send attempt, renewals and
    /// expiries are urgent (with any subtype), and a type Apple adds later is applied and found by
    /// the sweep.
    @Test func eachReaderTakesItsRuleFromTheTable() {
        #expect(!NotificationRules.rule(for: .test).appliesToPurchase)
        #expect(NotificationRules.rule(for: .refundReversed).clearsRevocation)
        #expect(!NotificationRules.rule(for: .refund).clearsRevocation)
        #expect(ConsumptionRequestDeadline.answerWithin == .hours(12))
        #expect(NotificationRules.table.filter { $0.value.answerWithin != nil }.keys.map(\.rawValue) == ["CONSUMPTION_REQUEST"])
        #expect(RunTimeline.isUrgent("DID_RENEW/BILLING_RECOVERY") && RunTimeline.isUrgent("EXPIRED"))
        #expect(!RunTimeline.isUrgent("REFUND") && !RunTimeline.isUrgent("CONSUMPTION_REQUEST"))
        #expect(NotificationRules.urgentTypeNames == ["DID_RENEW", "EXPIRED"])
        let later = NotificationRules.rule(for: NotificationTypeV2(rawValue: "A_TYPE_APPLE_ADDS_LATER"))
        #expect(later == NotificationRules.defaultRule && later.appliesToPurchase && later.typedQueries.isEmpty && !later.isUrgent)
    }
}
