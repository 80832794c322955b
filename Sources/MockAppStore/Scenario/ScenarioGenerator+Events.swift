import AppStoreServer

/// A subscription being simulated.
struct SubscriptionState {
    var accountId: String
    var originalTransactionId: String
    var product: MockProduct
    var ownership: InAppOwnershipType
    var appAccountToken: String
    var currentTransactionId = ""
    var originalPurchaseDate: Int64 = 0
    var renewal = JWSRenewalInfoDecodedPayload()
}

/// The events of a purchase's life, each recording transaction versions and emitting the
/// notification Apple sends for it.
extension ScenarioGenerator {
    mutating func newTransactionId() -> String {
        nextTransactionNumber += Int64.random(in: 1...7, using: &rng)
        return String(nextTransactionNumber)
    }

    mutating func ensureAccount(_ accountId: String) {
        if !world.accounts.contains(where: { $0.id == accountId }) {
            world.accounts.append(.init(id: accountId))
        }
    }

    var environment: AppStoreEnvironment { configuration.environment }

    /// The customer's identifier for the app, the same in all their transactions (as Apple's is).
    func appTransactionId(of accountId: String) -> String {
        let hash = "\(configuration.seed)/\(accountId)".utf8.reduce(UInt64(14_695_981_039_346_656_037)) { ($0 ^ UInt64($1)) &* 1_099_511_628_211 }
        let digits = String(hash % 10_000_000_000_000_000)
        return "70" + String(repeating: "0", count: 16 - digits.count) + digits
    }

    mutating func subscriptionTransaction(
        _ transactionId: String, _ state: SubscriptionState, purchase: Int64,
        reason: TransactionReason
    ) -> JWSTransactionDecodedPayload {
        nextWebOrderLineItem += 1
        let product = state.product
        return JWSTransactionDecodedPayload(
            originalTransactionId: state.originalTransactionId, transactionId: transactionId,
            webOrderLineItemId: String(nextWebOrderLineItem), bundleId: configuration.bundleId, productId: product.productId,
            subscriptionGroupIdentifier: product.subscriptionGroupIdentifier, purchaseDate: purchase,
            originalPurchaseDate: state.originalPurchaseDate, expiresDate: purchase + period * product.periods, quantity: 1,
            type: .autoRenewableSubscription, appAccountToken: state.appAccountToken, inAppOwnershipType: state.ownership,
            environment: environment, storefront: "USA", storefrontId: "143441", transactionReason: reason, currency: "USD",
            price: product.price, appTransactionId: appTransactionId(of: state.accountId))
    }

    mutating func oneTimeTransaction(
        _ transactionId: String, product: MockProduct, at time: Int64,
        accountId: String
    ) -> JWSTransactionDecodedPayload {
        JWSTransactionDecodedPayload(
            originalTransactionId: transactionId, transactionId: transactionId, bundleId: configuration.bundleId,
            productId: product.productId, purchaseDate: time, originalPurchaseDate: time, quantity: 1, type: product.type,
            inAppOwnershipType: .purchased, environment: environment, storefront: "USA", storefrontId: "143441",
            transactionReason: .purchase, currency: "USD", price: product.price, appTransactionId: appTransactionId(of: accountId))
    }

    /// Records a version of a transaction as of `modifiedAt`.
    mutating func record(_ transaction: JWSTransactionDecodedPayload, accountId: String, modifiedAt: Int64) {
        let transactionId = transaction.transactionId ?? ""
        if world.transactionVersions[transactionId] == nil {
            world.accountOfTransaction[transactionId] = accountId
            if let index = world.accounts.firstIndex(where: { $0.id == accountId }) {
                world.accounts[index].transactionIds.append(transactionId)
            }
        }
        world.transactionVersions[transactionId, default: []].append(.init(payload: transaction, modifiedAt: modifiedAt))
    }

    func currentTransaction(_ state: SubscriptionState) -> JWSTransactionDecodedPayload {
        world.transactionVersions[state.currentTransactionId]?.last?.payload ?? JWSTransactionDecodedPayload()
    }

    func currentExpiry(_ state: SubscriptionState) -> Int64 { currentTransaction(state).expiresDate ?? 0 }
    func currentPurchaseDate(_ state: SubscriptionState) -> Int64 { currentTransaction(state).purchaseDate ?? 0 }

    mutating func emit(
        _ type: NotificationTypeV2, _ subtype: Subtype?, at time: Int64, accountId: String,
        transaction: JWSTransactionDecodedPayload?, renewalInfo: JWSRenewalInfoDecodedPayload? = nil,
        status: Status? = nil, consumptionRequestReason: ConsumptionRequestReason? = nil
    ) {
        world.notifications.append(
            .init(
                notificationUUID: rng.uuid(), notificationType: type, subtype: subtype, signedDate: time, accountId: accountId,
                originalTransactionId: transaction?.originalTransactionId ?? renewalInfo?.originalTransactionId,
                transaction: transaction, renewalInfo: renewalInfo, status: status, consumptionRequestReason: consumptionRequestReason))
    }

    /// Emits a notification about a subscription with its current transaction and renewal info.
    mutating func emitSubscription(
        _ state: inout SubscriptionState, _ type: NotificationTypeV2, _ subtype: Subtype?,
        at time: Int64, status: Status
    ) {
        state.renewal.renewalDate = currentExpiry(state)
        world.recordSubscription(state.originalTransactionId, status: status, renewal: state.renewal, at: time)
        emit(
            type, subtype, at: time, accountId: state.accountId, transaction: currentTransaction(state),
            renewalInfo: state.renewal, status: status)
    }

    mutating func startSubscription(_ state: inout SubscriptionState, at time: Int64, subtype: Subtype) {
        ensureAccount(state.accountId)
        let transactionId = subtype == .initialBuy ? state.originalTransactionId : newTransactionId()
        if subtype == .initialBuy { state.originalPurchaseDate = time }
        var transaction = subscriptionTransaction(transactionId, state, purchase: time, reason: .purchase)
        if subtype == .initialBuy, rng.chance(0.3) {
            transaction.offerType = .introductoryOffer
            transaction.offerDiscountType = .freeTrial
            transaction.offerPeriod = "P1W"
            transaction.price = 0
        } else if subtype == .resubscribe, Self.takesWinBackOffer(transactionId) {
            // Half the lapsed subscribers come back through the win-back offer Apple listed for them
            // (decided by the transaction ID, not the seeded generator, so the rest of the scenario stays).
            transaction.offerType = .winBackOffer
            transaction.offerIdentifier = MockProduct.winBackOfferId
            transaction.offerDiscountType = .payUpFront
            transaction.offerPeriod = "P1M"
        }
        record(transaction, accountId: state.accountId, modifiedAt: time)
        state.currentTransactionId = transactionId
        state.renewal = JWSRenewalInfoDecodedPayload(
            originalTransactionId: state.originalTransactionId, autoRenewProductId: state.product.productId,
            productId: state.product.productId, autoRenewStatus: .on, isInBillingRetryPeriod: false,
            environment: environment, recentSubscriptionStartDate: time, currency: "USD", renewalPrice: state.product.price,
            appAccountToken: state.appAccountToken, appTransactionId: appTransactionId(of: state.accountId))
        emitSubscription(&state, .subscribed, subtype, at: time, status: .active)
    }

    /// Whether a resubscription comes through the win-back offer.
    static func takesWinBackOffer(_ transactionId: String) -> Bool {
        transactionId.utf8.reduce(UInt64(14_695_981_039_346_656_037)) { ($0 ^ UInt64($1)) &* 1_099_511_628_211 } % 2 == 0
    }

    mutating func renew(_ state: inout SubscriptionState, at time: Int64, subtype: Subtype?) {
        state.product = MockProduct.byId(state.renewal.autoRenewProductId)
        let transactionId = newTransactionId()
        record(subscriptionTransaction(transactionId, state, purchase: time, reason: .renewal), accountId: state.accountId, modifiedAt: time)
        state.currentTransactionId = transactionId
        state.renewal.productId = state.product.productId
        state.renewal.isInBillingRetryPeriod = false
        state.renewal.gracePeriodExpiresDate = nil
        state.renewal.expirationIntent = nil
        state.renewal.priceIncreaseStatus = nil
        state.renewal.renewalPrice = state.product.price
        emitSubscription(&state, .didRenew, subtype, at: time, status: .active)
    }

    mutating func setAutoRenew(_ state: inout SubscriptionState, on: Bool, at time: Int64) {
        state.renewal.autoRenewStatus = on ? .on : .off
        emitSubscription(&state, .didChangeRenewalStatus, on ? .autoRenewEnabled : .autoRenewDisabled, at: time, status: .active)
    }

    /// An upgrade takes effect at once: a new transaction, and the old one marked upgraded.
    mutating func upgrade(_ state: inout SubscriptionState, to product: MockProduct, at time: Int64) {
        var old = currentTransaction(state)
        old.isUpgraded = true
        record(old, accountId: state.accountId, modifiedAt: time)
        state.product = product
        let transactionId = newTransactionId()
        record(subscriptionTransaction(transactionId, state, purchase: time, reason: .purchase), accountId: state.accountId, modifiedAt: time)
        state.currentTransactionId = transactionId
        state.renewal.autoRenewProductId = product.productId
        state.renewal.productId = product.productId
        state.renewal.renewalPrice = product.price
        emitSubscription(&state, .didChangeRenewalPref, .upgrade, at: time, status: .active)
    }

    /// A downgrade takes effect at the next renewal.
    mutating func changeRenewalPreference(_ state: inout SubscriptionState, to product: MockProduct, at time: Int64) {
        state.renewal.autoRenewProductId = product.productId
        state.renewal.renewalPrice = product.price
        emitSubscription(&state, .didChangeRenewalPref, .downgrade, at: time, status: .active)
    }

    mutating func refundLatest(_ state: inout SubscriptionState, at time: Int64) {
        var transaction = currentTransaction(state)
        transaction.revocationDate = time - 1000
        transaction.revocationReason = .refundedDueToIssue
        transaction.revocationType = .refundFull
        transaction.revocationPercentage = 100_000
        record(transaction, accountId: state.accountId, modifiedAt: time)
        emitSubscription(&state, .refund, nil, at: time, status: .revoked)
    }

    mutating func reverseRefund(_ state: inout SubscriptionState, at time: Int64) {
        var transaction = currentTransaction(state)
        transaction.revocationDate = nil
        transaction.revocationReason = nil
        transaction.revocationType = nil
        transaction.revocationPercentage = nil
        record(transaction, accountId: state.accountId, modifiedAt: time)
        emitSubscription(&state, .refundReversed, nil, at: time, status: (transaction.expiresDate ?? 0) < time ? .expired : .active)
    }

    mutating func revokeFamilyShared(_ state: inout SubscriptionState, at time: Int64) {
        var transaction = currentTransaction(state)
        transaction.revocationDate = time - 500
        transaction.revocationReason = .refundedForOtherReason
        transaction.revocationType = .familyRevoke
        record(transaction, accountId: state.accountId, modifiedAt: time)
        emitSubscription(&state, .revoke, nil, at: time, status: .revoked)
    }

    mutating func expire(_ state: inout SubscriptionState, subtype: Subtype?, intent: ExpirationIntent, at time: Int64) {
        state.renewal.expirationIntent = intent
        // Apple lists the win-back offers a lapsed subscriber may redeem.
        state.renewal.eligibleWinBackOfferIds = intent == .customerCancelled ? [MockProduct.winBackOfferId] : nil
        state.renewal.isInBillingRetryPeriod = false
        state.renewal.gracePeriodExpiresDate = nil
        emitSubscription(&state, .expired, subtype, at: time, status: .expired)
    }

    /// A failed renewal: billing retry (with a grace period half the time), then recovery or
    /// expiry. Returns when it recovered, or `nil` when the subscription ended (or now came first).
    mutating func failToRenew(_ state: inout SubscriptionState, at time: Int64) -> Int64? {
        let grace = rng.chance(0.5)
        let graceEnd = time + period / 4
        state.renewal.isInBillingRetryPeriod = true
        state.renewal.gracePeriodExpiresDate = grace ? graceEnd : nil
        emitSubscription(&state, .didFailToRenew, grace ? .gracePeriod : nil, at: time, status: grace ? .billingGracePeriod : .billingRetry)
        if rng.chance(0.5) {
            let recovered = time + rng.within(period, from: 0.1, to: 0.9)
            if grace, graceEnd < recovered, graceEnd < now {
                emitSubscription(&state, .gracePeriodExpired, nil, at: graceEnd, status: .billingRetry)
            }
            guard recovered < now else { return nil }
            renew(&state, at: recovered, subtype: .billingRecovery)
            return recovered
        }
        if grace {
            guard graceEnd < now else { return nil }
            emitSubscription(&state, .gracePeriodExpired, nil, at: graceEnd, status: .billingRetry)
        }
        let retryEnd = time + period
        guard retryEnd < now else { return nil }
        expire(&state, subtype: .billingRetry, intent: .billingError, at: retryEnd)
        return nil
    }

    mutating func resubscribeMaybe(_ state: inout SubscriptionState, after time: Int64) -> Bool {
        guard rng.chance(0.3) else { return false }
        let at = time + rng.within(period, from: 0.2, to: 1.5)
        guard at < now else { return false }
        startSubscription(&state, at: at, subtype: .resubscribe)
        return true
    }
}
