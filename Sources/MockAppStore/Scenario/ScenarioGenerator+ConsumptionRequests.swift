import AppStoreServer

/// Consumption requests for subscriptions (a customer asked Apple for a refund of a subscription;
/// consumables get theirs as they are bought, ``ScenarioGenerator/simulateConsumables(accountId:)``),
/// and, with an outage that is over, scripted requests inside it: for a consumable early and late in
/// the outage, and for a subscription in its middle, so a long outage holds some older than Apple's
/// 12-hour deadline and some still open.
///
/// A request changes nothing: it carries the transaction, renewal info and status of the
/// notification before it, as Apple's would. It is drawn after everything else, from a generator of
/// its own (transaction IDs included), so the rest of the scenario stays as the seed made it.
extension ScenarioGenerator {
    /// The chance that a purchased subscription gets a consumption request.
    static let subscriptionConsumptionRequestRate = 0.06

    mutating func simulateConsumptionRequests() {
        var generator = SeededGenerator(seed: configuration.seed ^ 0xC0_45_0E)
        let reasons = ConsumptionRequestReason.knownValues
        var bySubscription: [String: [ScenarioWorld.PlannedNotification]] = [:]
        for plan in world.notifications {
            guard let original = plan.originalTransactionId, let transaction = plan.transaction,
                transaction.type == .autoRenewableSubscription, transaction.inAppOwnershipType == .purchased
            else { continue }
            bySubscription[original, default: []].append(plan)
        }
        var requests: [ScenarioWorld.PlannedNotification] = []
        for original in bySubscription.keys.sorted() {
            let plans = bySubscription[original]!.sorted { ($0.signedDate, $0.notificationUUID) < ($1.signedDate, $1.notificationUUID) }
            guard generator.chance(Self.subscriptionConsumptionRequestRate) else { continue }
            let index = Int(generator.next() % UInt64(plans.count))
            let before = plans[index]
            // Not for a transaction refunded or revoked already.
            guard before.transaction?.revocationDate == nil else { continue }
            let next = index + 1 < plans.count ? plans[index + 1].signedDate : min(before.signedDate + period, now)
            guard next - before.signedDate > 2_000 else { continue }
            let at = before.signedDate + 1_000 + generator.within(next - before.signedDate - 2_000, from: 0.2, to: 0.8)
            guard at < now else { continue }
            requests.append(
                consumptionRequest(after: before, at: at, reason: reasons[Int(generator.next() % UInt64(reasons.count))], generator: &generator))
        }
        world.notifications += requests
        if configuration.scriptedOutageCustomers, let start = configuration.outageStart, let end = configuration.outageEnd, end > start, end <= now {
            simulateScriptedConsumptionRequests(outageStart: start, outageEnd: end, generator: &generator)
        }
    }

    /// A consumption request signed at `at` carrying what `before` carried.
    func consumptionRequest(
        after before: ScenarioWorld.PlannedNotification, at time: Int64, reason: ConsumptionRequestReason, generator: inout SeededGenerator
    ) -> ScenarioWorld.PlannedNotification {
        ScenarioWorld.PlannedNotification(
            notificationUUID: generator.uuid(), notificationType: .consumptionRequest, subtype: nil, signedDate: time, accountId: before.accountId,
            originalTransactionId: before.originalTransactionId, transaction: before.transaction, renewalInfo: before.renewalInfo,
            status: before.status, consumptionRequestReason: reason)
    }

    /// Two consumables bought before the outage whose refund requests come early and late in it, and
    /// a yearly subscription bought before it whose refund request comes in its middle.
    mutating func simulateScriptedConsumptionRequests(outageStart: Int64, outageEnd: Int64, generator: inout SeededGenerator) {
        func inOutage(_ fraction: Double) -> Int64 { outageStart + Int64(Double(outageEnd - outageStart) * fraction) }
        let boughtAt = outageStart - period / 2
        guard boughtAt > configuration.start else { return }
        let buyer = "account-consumption-\(configuration.customers)"
        ensureAccount(buyer)
        for (fraction, reason) in [(0.1, ConsumptionRequestReason.unintendedPurchase), (0.9, .fulfillmentIssue)] {
            let coins = oneTimeTransaction(newTransactionId(using: &generator), product: .coins, at: boughtAt, accountId: buyer)
            record(coins, accountId: buyer, modifiedAt: boughtAt)
            let charge = ScenarioWorld.PlannedNotification(
                notificationUUID: generator.uuid(), notificationType: .oneTimeCharge, subtype: nil, signedDate: boughtAt, accountId: buyer,
                originalTransactionId: coins.originalTransactionId, transaction: coins)
            world.notifications.append(charge)
            world.notifications.append(consumptionRequest(after: charge, at: inOutage(fraction), reason: reason, generator: &generator))
        }
        let subscriber = "account-consumption-subscriber-\(configuration.customers)"
        ensureAccount(subscriber)
        let original = newTransactionId(using: &generator)
        var state = SubscriptionState(
            accountId: subscriber, originalTransactionId: original, product: .premiumYearly, ownership: .purchased,
            appAccountToken: generator.uuid(), currentTransactionId: original, originalPurchaseDate: boughtAt)
        let transaction = subscriptionTransaction(original, state, purchase: boughtAt, reason: .purchase)
        record(transaction, accountId: subscriber, modifiedAt: boughtAt)
        state.renewal = JWSRenewalInfoDecodedPayload(
            originalTransactionId: original, autoRenewProductId: state.product.productId, productId: state.product.productId,
            autoRenewStatus: .on, isInBillingRetryPeriod: false, environment: environment, recentSubscriptionStartDate: boughtAt,
            renewalDate: transaction.expiresDate, currency: "USD", renewalPrice: state.product.price, appAccountToken: state.appAccountToken,
            appTransactionId: appTransactionId(of: subscriber))
        world.recordSubscription(original, status: .active, renewal: state.renewal, at: boughtAt)
        let subscribed = ScenarioWorld.PlannedNotification(
            notificationUUID: generator.uuid(), notificationType: .subscribed, subtype: .initialBuy, signedDate: boughtAt, accountId: subscriber,
            originalTransactionId: original, transaction: transaction, renewalInfo: state.renewal, status: .active)
        world.notifications.append(subscribed)
        world.notifications.append(consumptionRequest(after: subscribed, at: inOutage(0.5), reason: .unsatisfiedWithPurchase, generator: &generator))
    }

    /// A transaction ID after the scenario's others, drawn from `generator` (not the scenario's own).
    mutating func newTransactionId(using generator: inout SeededGenerator) -> String {
        nextTransactionNumber += Int64.random(in: 1...7, using: &generator)
        return String(nextTransactionNumber)
    }
}
