import AppStoreServer

/// Customers a new deployment cannot learn of from Apple's notifications: their last activity is
/// older than the notification history's retention, so no run replays it and no webhook receives
/// it again. The app's own database still holds their IDs (`GET /mock/identifiers`).
extension ScenarioGenerator {
    /// ``ScenarioConfiguration/dormantCustomers`` customers, `account-dormant-N`, in turn: an
    /// annual subscription bought more than the retention ago and running for a real year
    /// (entitled, auto-renew on, no renewal yet), a lifetime unlock, and a monthly subscription
    /// that expired (a real month after its purchase) before the retention began. Drawn from a
    /// generator of their own and after every other customer, so the rest of the scenario is
    /// the same with or without them; they emit no notification.
    mutating func simulateDormantCustomers() {
        let day: Int64 = 86_400_000
        let retention = configuration.historyRetention
        var dormant = SeededGenerator(seed: configuration.seed ^ 0xD0_4A47)
        for index in 0..<configuration.dormantCustomers {
            let accountId = "account-dormant-\(index)"
            ensureAccount(accountId)
            // Quiet for longer than the retention, by a day to a month more.
            let boughtAt = now - retention - day - dormant.within(30 * day)
            switch index % 3 {
            case 0:
                recordDormantSubscription(accountId, product: .premiumYearly, boughtAt: boughtAt, term: 365 * day, generator: &dormant)
            case 1:
                record(
                    oneTimeTransaction(newTransactionId(), product: .lifetime, at: boughtAt, accountId: accountId), accountId: accountId,
                    modifiedAt: boughtAt)
            default:
                // Expired a month after its purchase, itself more than a month before the retention.
                recordDormantSubscription(accountId, product: .premiumMonthly, boughtAt: boughtAt - 31 * day, term: 30 * day, generator: &dormant)
            }
        }
    }

    /// A subscription bought at `boughtAt` for `term` (real time, not the scenario's accelerated
    /// period), with its renewal info and status as Get All Subscription Statuses shows them now:
    /// active with auto-renew on while the term runs, expired (cancelled) after.
    private mutating func recordDormantSubscription(
        _ accountId: String, product: MockProduct, boughtAt: Int64, term: Int64, generator: inout SeededGenerator
    ) {
        var state = SubscriptionState(
            accountId: accountId, originalTransactionId: newTransactionId(), product: product, ownership: .purchased,
            appAccountToken: generator.uuid())
        state.originalPurchaseDate = boughtAt
        var transaction = subscriptionTransaction(state.originalTransactionId, state, purchase: boughtAt, reason: .purchase)
        transaction.expiresDate = boughtAt + term
        record(transaction, accountId: accountId, modifiedAt: boughtAt)
        let running = boughtAt + term > now
        let renewal = JWSRenewalInfoDecodedPayload(
            expirationIntent: running ? nil : .customerCancelled, originalTransactionId: state.originalTransactionId,
            autoRenewProductId: product.productId, productId: product.productId, autoRenewStatus: running ? .on : .off, isInBillingRetryPeriod: false,
            environment: environment, recentSubscriptionStartDate: boughtAt, renewalDate: boughtAt + term, currency: "USD",
            renewalPrice: product.price, appAccountToken: state.appAccountToken, appTransactionId: appTransactionId(of: accountId))
        world.recordSubscription(state.originalTransactionId, status: running ? .active : .expired, renewal: renewal, at: boughtAt)
    }
}
