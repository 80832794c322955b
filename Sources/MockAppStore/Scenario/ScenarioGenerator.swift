import AppStoreServer

/// Simulates customers' purchases deterministically from a ``ScenarioConfiguration``.
///
/// Subscriptions renew every period and meet the events Apple notifies about: voluntary and
/// involuntary expiry (billing retry, grace period, recovery), upgrades, downgrades, price
/// increases, refunds and their reversal, family-sharing revokes, resubscription; consumables and
/// non-consumables are bought, some with consumption requests and refunds; some subscriptions get
/// consumption requests too, and a scenario with an outage has some inside it. Every event emits the
/// notification Apple would send, with the right type and subtype, carrying the transaction and
/// renewal info as they were at that moment. App-level notifications without `data` (summary,
/// external purchase token, rescinded consent) happen live and inside the outage, and every
/// transaction has an order ID for Look Up Order ID.
package struct ScenarioGenerator {
    let configuration: ScenarioConfiguration
    var rng: SeededGenerator
    var world = ScenarioWorld()
    var nextTransactionNumber: Int64
    var nextWebOrderLineItem: Int64

    /// How many IDs each ``ScenarioConfiguration/transactionIdBlock`` holds.
    static let transactionIdBlockSize: Int64 = 10_000_000_000

    package init(configuration: ScenarioConfiguration) {
        self.configuration = configuration
        self.rng = SeededGenerator(seed: configuration.seed)
        let offset = Int64(configuration.transactionIdBlock) * Self.transactionIdBlockSize
        self.nextTransactionNumber = 2_000_000_100_000_000 + offset
        self.nextWebOrderLineItem = 120_000_000_000 + offset
    }

    /// Builds the world.
    package static func generate(_ configuration: ScenarioConfiguration) -> ScenarioWorld {
        var generator = ScenarioGenerator(configuration: configuration)
        for index in 0..<configuration.customers {
            generator.simulateCustomer(index: index)
        }
        // Scripted events are placed inside the outage, so it must be over.
        if configuration.scriptedOutageCustomers, let start = configuration.outageStart, let end = configuration.outageEnd, end > start,
            end <= configuration.now
        {
            generator.simulateScriptedOutageCustomers(outageStart: start, outageEnd: end)
        }
        generator.simulateSeasonPasses()
        if configuration.notificationsWithoutData {
            generator.simulateNotificationsWithoutData()
        }
        generator.simulateConsumptionRequests()
        generator.simulateDormantCustomers()
        assignOrderIds(&generator.world, seed: configuration.seed)
        generator.world.notifications.sort { ($0.signedDate, $0.notificationUUID) < ($1.signedDate, $1.notificationUUID) }
        return generator.world
    }

    var now: Int64 { configuration.now }
    var period: Int64 { configuration.renewalPeriod }

    // MARK: Customers

    mutating func simulateCustomer(index: Int) {
        let accountId = "account-\(index)"
        world.accounts.append(.init(id: accountId))
        let start = configuration.start
        let roll = Double.random(in: 0..<1, using: &rng)
        switch roll {
        case ..<0.55:
            let product = rng.chance(0.5) ? MockProduct.premiumMonthly : .basicMonthly
            simulateSubscription(
                accountId: accountId, product: product, ownership: .purchased,
                start: start + rng.within(configuration.span, to: 0.7))
            if rng.chance(0.25) { simulateConsumables(accountId: accountId) }
        case ..<0.65:
            simulateSubscription(
                accountId: accountId, product: .premiumYearly, ownership: .purchased,
                start: start - rng.within(11 * period) + rng.within(configuration.span, to: 0.5))
        case ..<0.72:
            simulateSubscription(
                accountId: accountId, product: .premiumMonthly, ownership: .familyShared,
                start: start + rng.within(configuration.span, to: 0.6))
        case ..<0.88:
            simulateConsumables(accountId: accountId)
        default:
            simulateNonConsumable(accountId: accountId, at: start + rng.within(configuration.span, to: 0.9))
        }
    }

    /// How often a subscription meets each kind of event, per period.
    struct SubscriptionRates {
        /// The chance of one notable event (auto-renew change, upgrade, price increase, refund...) inside a period.
        var notableEvent: Double
        /// The chance that the product is removed from sale at a renewal.
        var productNotForSale: Double
        /// The chance that a renewal fails (billing retry, then recovery or expiry).
        var failedRenewal: Double

        /// The default scenarios' mix: eventful lives.
        static let standard = SubscriptionRates(notableEvent: 0.35, productNotForSale: 0.03, failedRenewal: 0.18)
        /// The scale scenario's mix: mostly plain renewals, every other kind still present.
        static let mostlyRenewals = SubscriptionRates(notableEvent: 0.06, productNotForSale: 0.005, failedRenewal: 0.03)
    }

    /// A subscription's life from its first purchase until now.
    mutating func simulateSubscription(
        accountId: String, product: MockProduct, ownership: InAppOwnershipType, start: Int64,
        rates: SubscriptionRates = .standard
    ) {
        guard start < now else { return }
        let appAccountToken = rng.uuid()
        var state = SubscriptionState(
            accountId: accountId, originalTransactionId: newTransactionId(), product: product, ownership: ownership,
            appAccountToken: appAccountToken)
        startSubscription(&state, at: start, subtype: .initialBuy)
        var periodStart = start
        var pendingPriceIncrease = false
        while true {
            let expiry = currentExpiry(state)
            // At most one notable event inside the period.
            if rng.chance(rates.notableEvent) {
                let at = periodStart + rng.within(expiry - periodStart, from: 0.15, to: 0.85)
                guard at < now else { return }
                let pick = Double.random(in: 0..<1, using: &rng)
                if state.ownership == .familyShared, pick < 0.5 {
                    revokeFamilyShared(&state, at: at)
                    return
                } else if pick < 0.3 {
                    setAutoRenew(&state, on: false, at: at)
                    if rng.chance(0.3) {
                        let back = at + rng.within(expiry - at, from: 0.2, to: 0.8)
                        guard back < now else { return }
                        setAutoRenew(&state, on: true, at: back)
                    }
                } else if pick < 0.42, state.product.level > 1 {
                    upgrade(&state, to: .premiumMonthly, at: at)
                    periodStart = at
                    continue
                } else if pick < 0.52, state.product == .premiumMonthly {
                    changeRenewalPreference(&state, to: .basicMonthly, at: at)
                } else if pick < 0.62 {
                    emitSubscription(&state, .priceIncrease, .pending, at: at, status: .active)
                    pendingPriceIncrease = true
                    if rng.chance(0.5) {
                        let accepted = at + rng.within(expiry - at, from: 0.1, to: 0.7)
                        guard accepted < now else { return }
                        state.renewal.priceIncreaseStatus = .customerConsentedOrWasNotifiedWithoutNeedingConsent
                        emitSubscription(&state, .priceIncrease, .accepted, at: accepted, status: .active)
                        pendingPriceIncrease = false
                    }
                } else if pick < 0.72 {
                    refundLatest(&state, at: at)
                    if rng.chance(0.3) {
                        let reversal = at + rng.within(4 * period, from: 0.1, to: 1)
                        if reversal < now { reverseRefund(&state, at: reversal) }
                    }
                    return
                } else if pick < 0.72 + configuration.unknownTypeRate * 4 {
                    emitSubscription(
                        &state, NotificationTypeV2(rawValue: "FUTURE_NOTIFICATION_TYPE"),
                        rng.chance(0.5) ? Subtype(rawValue: "FUTURE_SUBTYPE") : nil, at: at, status: .active)
                }
            }
            guard expiry < now else { return }
            // The period ends.
            if state.renewal.autoRenewStatus == .off {
                expire(&state, subtype: rng.chance(0.9) ? .voluntary : nil, intent: .customerCancelled, at: expiry)
                guard resubscribeMaybe(&state, after: expiry) else { return }
                periodStart = currentPurchaseDate(state)
                pendingPriceIncrease = false
            } else if pendingPriceIncrease {
                expire(&state, subtype: .priceIncrease, intent: .customerDidNotConsentToPriceIncrease, at: expiry)
                return
            } else if rng.chance(rates.productNotForSale) {
                expire(&state, subtype: .productNotForSale, intent: .productNotAvailable, at: expiry)
                return
            } else if rng.chance(rates.failedRenewal) {
                guard let recoveredAt = failToRenew(&state, at: expiry) else { return }
                periodStart = recoveredAt
            } else {
                renew(&state, at: expiry, subtype: nil)
                periodStart = expiry
            }
        }
    }

    mutating func simulateConsumables(accountId: String) {
        ensureAccount(accountId)
        let purchases = Int.random(in: 1...4, using: &rng)
        for _ in 0..<purchases {
            let at = configuration.start + rng.within(configuration.span, to: 0.95)
            let transactionId = newTransactionId()
            var transaction = oneTimeTransaction(transactionId, product: .coins, at: at, accountId: accountId)
            record(transaction, accountId: accountId, modifiedAt: at)
            emit(.oneTimeCharge, nil, at: at, accountId: accountId, transaction: transaction)
            if rng.chance(0.2) {
                let request = at + rng.within(period, from: 0.1, to: 1)
                guard request < now else { continue }
                emit(
                    .consumptionRequest, nil, at: request, accountId: accountId, transaction: transaction,
                    consumptionRequestReason: rng.chance(0.5) ? .unintendedPurchase : .fulfillmentIssue)
                let decision = request + rng.within(period, from: 0.1, to: 1)
                guard decision < now else { continue }
                if rng.chance(0.6) {
                    transaction.revocationDate = decision - 1000
                    transaction.revocationReason = .refundedForOtherReason
                    let prorated = rng.chance(0.3)
                    transaction.revocationType = prorated ? .refundProrated : .refundFull
                    transaction.revocationPercentage = prorated ? 50_000 : 100_000
                    record(transaction, accountId: accountId, modifiedAt: decision)
                    emit(.refund, nil, at: decision, accountId: accountId, transaction: transaction)
                } else {
                    emit(.refundDeclined, nil, at: decision, accountId: accountId, transaction: transaction)
                }
            }
        }
    }

    mutating func simulateNonConsumable(accountId: String, at: Int64) {
        ensureAccount(accountId)
        guard at < now else { return }
        var transaction = oneTimeTransaction(newTransactionId(), product: .lifetime, at: at, accountId: accountId)
        record(transaction, accountId: accountId, modifiedAt: at)
        emit(.oneTimeCharge, nil, at: at, accountId: accountId, transaction: transaction)
        if rng.chance(0.15) {
            let refund = at + rng.within(2 * period, from: 0.2, to: 1)
            guard refund < now else { return }
            transaction.revocationDate = refund - 2000
            transaction.revocationReason = .refundedDueToIssue
            transaction.revocationType = .refundFull
            transaction.revocationPercentage = 100_000
            record(transaction, accountId: accountId, modifiedAt: refund)
            emit(.refund, nil, at: refund, accountId: accountId, transaction: transaction)
        }
    }

    /// Non-renewing season passes, drawn from a generator of their own so the other customers stay
    /// as the seed made them: a few customers buy one (some long expired, some running, some
    /// refunded), and with an outage one is bought inside it and one fourteen periods before.
    mutating func simulateSeasonPasses() {
        let product = MockProduct.seasonPass
        world.nonRenewingTerms[product.productId] = product.periods * period
        var passes = SeededGenerator(seed: configuration.seed ^ 0x5EA5_0A55)
        var buyers: [(account: String, at: Int64)] = []
        for index in 0..<configuration.customers where passes.chance(0.08) {
            buyers.append(("account-\(index)", configuration.start + passes.within(configuration.span, to: 0.95)))
        }
        if configuration.scriptedOutageCustomers, let start = configuration.outageStart, let end = configuration.outageEnd, end > start,
            end <= configuration.now
        {
            let buyer = "account-pass-\(configuration.customers)"
            buyers.append((buyer, start + (end - start) / 3))
            buyers.append((buyer, now - 14 * period))
        }
        for (account, at) in buyers where at < now {
            ensureAccount(account)
            var transaction = oneTimeTransaction(newTransactionId(), product: product, at: at, accountId: account)
            record(transaction, accountId: account, modifiedAt: at)
            emit(.oneTimeCharge, nil, at: at, accountId: account, transaction: transaction)
            if passes.chance(0.1) {
                let refund = at + passes.within(period, from: 0.2, to: 0.9)
                guard refund < now else { continue }
                transaction.revocationDate = refund - 1000
                transaction.revocationReason = .refundedDueToIssue
                transaction.revocationType = .refundFull
                transaction.revocationPercentage = 100_000
                record(transaction, accountId: account, modifiedAt: refund)
                emit(.refund, nil, at: refund, accountId: account, transaction: transaction)
            }
        }
    }

    /// Customers whose notable events are placed inside the outage, so every kind of
    /// notification a run must recover is there to recover.
    mutating func simulateScriptedOutageCustomers(outageStart: Int64, outageEnd: Int64) {
        let window = outageEnd - outageStart
        func inOutage(_ fraction: Double) -> Int64 { outageStart + Int64(Double(window) * fraction) }
        var index = configuration.customers

        func newSubscriber(
            _ product: MockProduct = .premiumMonthly, ownership: InAppOwnershipType = .purchased,
            firstExpiry: Int64, generator: inout ScenarioGenerator
        ) -> SubscriptionState {
            let accountId = "account-\(index)"
            index += 1
            generator.ensureAccount(accountId)
            var state = SubscriptionState(
                accountId: accountId, originalTransactionId: generator.newTransactionId(), product: product,
                ownership: ownership, appAccountToken: generator.rng.uuid())
            generator.startSubscription(&state, at: firstExpiry - generator.period * product.periods, subtype: .initialBuy)
            return state
        }

        // A plain renewal.
        var renewing = newSubscriber(firstExpiry: inOutage(0.2), generator: &self)
        renew(&renewing, at: inOutage(0.2), subtype: nil)
        // A billing failure recovered inside the outage: DID_RENEW with subtype BILLING_RECOVERY.
        var recovering = newSubscriber(.basicMonthly, firstExpiry: inOutage(0.1), generator: &self)
        recovering.renewal.isInBillingRetryPeriod = true
        emitSubscription(&recovering, .didFailToRenew, nil, at: inOutage(0.1), status: .billingRetry)
        recovering.renewal.isInBillingRetryPeriod = false
        renew(&recovering, at: inOutage(0.6), subtype: .billingRecovery)
        // A voluntary expiry: auto-renew turned off before the outage, expiring inside it.
        var leaving = newSubscriber(firstExpiry: inOutage(0.3), generator: &self)
        setAutoRenew(&leaving, on: false, at: inOutage(0.3) - period / 2)
        expire(&leaving, subtype: .voluntary, intent: .customerCancelled, at: inOutage(0.3))
        // Billing retry ending in expiry, with a grace period that expires first.
        var lapsing = newSubscriber(firstExpiry: inOutage(0.05), generator: &self)
        lapsing.renewal.isInBillingRetryPeriod = true
        lapsing.renewal.gracePeriodExpiresDate = inOutage(0.4)
        emitSubscription(&lapsing, .didFailToRenew, .gracePeriod, at: inOutage(0.05), status: .billingGracePeriod)
        emitSubscription(&lapsing, .gracePeriodExpired, nil, at: inOutage(0.4), status: .billingRetry)
        lapsing.renewal.isInBillingRetryPeriod = false
        expire(&lapsing, subtype: .billingRetry, intent: .billingError, at: inOutage(0.7))
        // A price increase not consented to.
        var priced = newSubscriber(firstExpiry: inOutage(0.5), generator: &self)
        emitSubscription(&priced, .priceIncrease, .pending, at: inOutage(0.5) - period / 3, status: .active)
        expire(&priced, subtype: .priceIncrease, intent: .customerDidNotConsentToPriceIncrease, at: inOutage(0.5))
        // A product removed from sale, and an expiry for "some other reason" (no subtype).
        var removed = newSubscriber(firstExpiry: inOutage(0.55), generator: &self)
        expire(&removed, subtype: .productNotForSale, intent: .productNotAvailable, at: inOutage(0.55))
        var other = newSubscriber(firstExpiry: inOutage(0.65), generator: &self)
        setAutoRenew(&other, on: false, at: inOutage(0.65) - period / 4)
        expire(&other, subtype: nil, intent: .other, at: inOutage(0.65))
        // The next subscribers are still in their first period when the outage ends. With a period
        // shorter than the outage they were bought inside it, and their events must follow the
        // purchase: a revoke signed before the purchase would leave Apple's status (newest
        // signedDate) active where the simulation's last event says revoked.
        let boughtAt = outageEnd + period / 2 - period
        func afterPurchase(_ fraction: Double) -> Int64 {
            let from = max(outageStart, boughtAt + 1000)
            return from + Int64(Double(outageEnd - from) * fraction)
        }
        // A refund and a family-sharing revoke.
        var refunded = newSubscriber(firstExpiry: outageEnd + period / 2, generator: &self)
        refundLatest(&refunded, at: afterPurchase(0.45))
        var family = newSubscriber(ownership: .familyShared, firstExpiry: outageEnd + period / 2, generator: &self)
        revokeFamilyShared(&family, at: afterPurchase(0.5))
        // A failure to renew without grace that is still in billing retry at the end.
        var failing = newSubscriber(firstExpiry: inOutage(0.75), generator: &self)
        failing.renewal.isInBillingRetryPeriod = true
        emitSubscription(&failing, .didFailToRenew, nil, at: inOutage(0.75), status: .billingRetry)
        // Types this code does not know.
        var future = newSubscriber(firstExpiry: outageEnd + period / 2, generator: &self)
        emitSubscription(&future, NotificationTypeV2(rawValue: "FUTURE_NOTIFICATION_TYPE"), nil, at: afterPurchase(0.35), status: .active)
        emitSubscription(
            &future, NotificationTypeV2(rawValue: "FUTURE_NOTIFICATION_TYPE"), Subtype(rawValue: "FUTURE_SUBTYPE"),
            at: afterPurchase(0.85), status: .active)
        // An upgrade and a downgrade.
        var upgrading = newSubscriber(.basicMonthly, firstExpiry: outageEnd + period / 2, generator: &self)
        upgrade(&upgrading, to: .premiumMonthly, at: afterPurchase(0.25))
        var downgrading = newSubscriber(firstExpiry: outageEnd + period / 2, generator: &self)
        changeRenewalPreference(&downgrading, to: .basicMonthly, at: afterPurchase(0.15))
        // One-time purchases.
        let buyer = "account-\(index)"
        index += 1
        ensureAccount(buyer)
        let coins = oneTimeTransaction(newTransactionId(), product: .coins, at: inOutage(0.12), accountId: buyer)
        record(coins, accountId: buyer, modifiedAt: inOutage(0.12))
        emit(.oneTimeCharge, nil, at: inOutage(0.12), accountId: buyer, transaction: coins)
        var lifetime = oneTimeTransaction(newTransactionId(), product: .lifetime, at: outageStart - period, accountId: buyer)
        record(lifetime, accountId: buyer, modifiedAt: outageStart - period)
        emit(.oneTimeCharge, nil, at: outageStart - period, accountId: buyer, transaction: lifetime)
        lifetime.revocationDate = inOutage(0.9) - 1000
        lifetime.revocationReason = .refundedDueToIssue
        lifetime.revocationType = .refundFull
        lifetime.revocationPercentage = 100_000
        record(lifetime, accountId: buyer, modifiedAt: inOutage(0.9))
        emit(.refund, nil, at: inOutage(0.9), accountId: buyer, transaction: lifetime)
    }
}
