import AppStoreServer
import Foundation
import ReconcilerShared
import Testing

@testable import MockAppStore

@Suite struct ScenarioTests {
    let now: Int64 = 1_790_000_000_000
    var configuration: ScenarioConfiguration {
        .init(seed: 42, customers: 150, now: now, outageStart: now - 6 * 3_600_000, outageEnd: now - 3 * 3_600_000)
    }

    @Test func theSameSeedGivesTheSameWorld() {
        let a = ScenarioGenerator.generate(configuration)
        let b = ScenarioGenerator.generate(configuration)
        #expect(a.notifications.map(\.notificationUUID) == b.notifications.map(\.notificationUUID))
        #expect(GroundTruth.purchases(a) == GroundTruth.purchases(b))
        var other = configuration
        other.seed = 43
        #expect(ScenarioGenerator.generate(other).notifications.map(\.notificationUUID) != a.notifications.map(\.notificationUUID))
    }

    @Test func everyTypeAndSubtypePairIsOneAppleDocuments() {
        let world = ScenarioGenerator.generate(configuration)
        for notification in world.notifications where notification.notificationType.isKnown {
            let allowed = MockAppStore.subtypesByType[notification.notificationType.rawValue]
            #expect(allowed != nil)
            if let subtype = notification.subtype {
                #expect(allowed?.contains(subtype.rawValue) == true, "\(notification.notificationType)/\(subtype)")
            }
        }
    }

    @Test func notificationsHappenInThePastAndCarryConsistentData() {
        let world = ScenarioGenerator.generate(configuration)
        #expect(world.notifications.count > 300)
        for notification in world.notifications {
            #expect(notification.signedDate <= now)
            if let transaction = notification.transaction, let renewal = notification.renewalInfo {
                #expect(transaction.originalTransactionId == renewal.originalTransactionId)
            }
            if let transaction = notification.transaction {
                #expect(transaction.environment == .production)
                #expect(transaction.bundleId == configuration.bundleId)
            } else {
                #expect(!notification.carriesData, "\(notification.notificationType) without a transaction")
            }
        }
        #expect(Set(world.notifications.map(\.notificationUUID)).count == world.notifications.count)
    }

    @Test func theOutageHoldsEveryKindOfEventARunMustRecover() {
        let world = ScenarioGenerator.generate(configuration)
        let inOutage = Set(
            world.notifications.filter { configuration.isInOutage($0.signedDate) }
                .map { notification in
                    notification.subtype.map { "\(notification.notificationType.rawValue)/\($0.rawValue)" } ?? notification.notificationType.rawValue
                })
        for expected in [
            "DID_RENEW", "DID_RENEW/BILLING_RECOVERY", "EXPIRED/VOLUNTARY", "EXPIRED/BILLING_RETRY", "EXPIRED/PRICE_INCREASE",
            "EXPIRED/PRODUCT_NOT_FOR_SALE", "EXPIRED", "REFUND", "REVOKE", "GRACE_PERIOD_EXPIRED", "DID_FAIL_TO_RENEW",
            "DID_FAIL_TO_RENEW/GRACE_PERIOD", "FUTURE_NOTIFICATION_TYPE", "FUTURE_NOTIFICATION_TYPE/FUTURE_SUBTYPE",
            "DID_CHANGE_RENEWAL_PREF/UPGRADE", "DID_CHANGE_RENEWAL_PREF/DOWNGRADE", "ONE_TIME_CHARGE",
            "RENEWAL_EXTENSION/SUMMARY", "EXTERNAL_PURCHASE_TOKEN/CREATED", "EXTERNAL_PURCHASE_TOKEN/ACTIVE_TOKEN_REMINDER",
            "EXTERNAL_PURCHASE_TOKEN/UNREPORTED", "RESCIND_CONSENT", "CONSUMPTION_REQUEST",
        ] {
            #expect(inOutage.contains(expected), "\(expected) missing from the outage")
        }
    }

    /// Consumption requests come for consumables and for subscriptions, each with the customer's
    /// reason and the transaction the refund is asked for; some are inside the outage, and a long
    /// outage holds some whose 12 hours passed before it ended and some that did not.
    @Test func consumptionRequestsComeForConsumablesAndSubscriptionsInsideTheOutageToo() {
        var long = configuration
        (long.outageStart, long.outageEnd) = (now - 20 * 3_600_000, now - 60_000)
        let world = ScenarioGenerator.generate(long)
        let requests = world.notifications.filter { $0.notificationType == .consumptionRequest }
        #expect(requests.allSatisfy { $0.consumptionRequestReason?.isKnown == true && $0.transaction?.transactionId != nil })
        let types = Set(requests.compactMap(\.transaction?.type))
        #expect(types.isSuperset(of: [.consumable, .autoRenewableSubscription]), "\(types)")
        let inOutage = requests.filter { long.isInOutage($0.signedDate) }
        #expect(inOutage.contains { $0.transaction?.type == .consumable } && inOutage.contains { $0.transaction?.type == .autoRenewableSubscription })
        #expect(inOutage.contains { $0.signedDate < now - 12 * 3_600_000 } && inOutage.contains { $0.signedDate > now - 12 * 3_600_000 })
        // A request changes nothing: the truth's purchases are those of a world without them.
        var without = world
        without.notifications.removeAll { $0.notificationType == .consumptionRequest }
        #expect(
            GroundTruth.purchases(world).map {
                var state = $0
                state.lastSignedDate = nil
                return state
            }
                == GroundTruth.purchases(without).map {
                    var state = $0
                    state.lastSignedDate = nil
                    return state
                })
    }

    /// The export's new fields come from the latest transaction: the customer's app transaction
    /// ID, the refund's type and percentage (prorated ones too), and offers (win-back offers with
    /// their identifier).
    @Test func theTruthCarriesTheLatestTransactionsRevocationOfferAndAppTransactionId() {
        var many = configuration
        many.customers = 600
        let truth = GroundTruth.purchases(ScenarioGenerator.generate(many))
        #expect(truth.allSatisfy { $0.appTransactionId != nil })
        #expect(truth.contains { $0.revocationType == "REFUND_PRORATED" && $0.revocationPercentage == 50_000 })
        #expect(truth.contains { $0.revocationType == "REFUND_FULL" && $0.revocationPercentage == 100_000 })
        #expect(truth.contains { $0.offerType == 4 && $0.offerIdentifier == "com.example.winback.premium" })
        #expect(truth.contains { $0.offerType == 1 && $0.offerIdentifier == nil })
        #expect(truth.filter { $0.revocationDate == nil }.allSatisfy { $0.revocationType == nil && $0.revocationPercentage == nil })
    }

    @Test func theTruthFollowsTheDocumentedDerivation() {
        let world = ScenarioGenerator.generate(configuration)
        let truth = GroundTruth.purchases(world)
        #expect(truth.count > 100)
        for state in truth {
            let transactions = world.currentTransactions.values.map(\.payload).filter { $0.originalTransactionId == state.originalTransactionId }
            let notUpgraded = transactions.filter { $0.isUpgraded != true }
            let newest = notUpgraded.max { ($0.purchaseDate ?? 0, $0.transactionId ?? "") < ($1.purchaseDate ?? 0, $1.transactionId ?? "") }
            #expect(state.latestTransactionId == newest?.transactionId)
            #expect(
                state.lastSignedDate == world.notifications.filter { $0.originalTransactionId == state.originalTransactionId }.map(\.signedDate).max()
            )
        }
        // Upgrades exist, and the upgraded transaction is never the latest.
        let upgraded = world.currentTransactions.values.filter { $0.payload.isUpgraded == true }.compactMap(\.payload.transactionId)
        #expect(!upgraded.isEmpty)
        #expect(Set(truth.compactMap(\.latestTransactionId)).isDisjoint(with: upgraded))
    }

    /// Apple's status is the one signed last, and the truth's is the simulation's last event: they
    /// agree only if no event is signed before the purchase it changes, including scripted customers
    /// bought inside an outage longer than a period (13 h here, 8 h periods).
    @Test(arguments: [3, 13]) func theTruthsStatusIsTheNewestSignedOne(outageHours: Int64) {
        var configuration = configuration
        configuration.outageStart = now - (outageHours + 3) * 3_600_000
        let world = ScenarioGenerator.generate(configuration)
        var newest: [String: ScenarioWorld.PlannedNotification] = [:]
        for notification in world.notifications where notification.status != nil {
            guard let original = notification.originalTransactionId else { continue }
            if notification.signedDate >= newest[original]?.signedDate ?? .min { newest[original] = notification }
            if let purchased = notification.transaction?.originalPurchaseDate {
                #expect(notification.signedDate >= purchased, "\(notification.notificationType) signed before \(original) was bought")
            }
        }
        let subscriptions = GroundTruth.purchases(world).filter { $0.status != nil }
        #expect(subscriptions.count > 100)
        for state in subscriptions {
            #expect(state.status == newest[state.originalTransactionId]?.status?.rawValue, "\(state.originalTransactionId)")
        }
    }

    /// Each kind without `data` also happens outside the outage (delivered live), names no
    /// customer and no purchase, and leaves the ground truth as it is without them.
    @Test func notificationsWithoutDataCarryNoPurchase() {
        let world = ScenarioGenerator.generate(configuration)
        let withoutData = world.notifications.filter { !$0.carriesData }
        let live = Set(withoutData.filter { !configuration.isInOutage($0.signedDate) }.map { "\($0.notificationType)/\($0.subtype?.rawValue ?? "")" })
        #expect(
            live == [
                "RENEWAL_EXTENSION/SUMMARY", "EXTERNAL_PURCHASE_TOKEN/CREATED", "EXTERNAL_PURCHASE_TOKEN/ACTIVE_TOKEN_REMINDER",
                "EXTERNAL_PURCHASE_TOKEN/UNREPORTED", "RESCIND_CONSENT/",
            ])
        for notification in withoutData {
            #expect(notification.accountId == nil && notification.originalTransactionId == nil && notification.transaction == nil)
        }
        var without = configuration
        without.notificationsWithoutData = false
        let plain = ScenarioGenerator.generate(without)
        #expect(plain.notifications.allSatisfy { $0.carriesData })
        #expect(GroundTruth.purchases(plain) == GroundTruth.purchases(world))
        #expect(plain.orders == world.orders)
    }

    /// Every purchase and renewal has its own order ID, 10 uppercase letters and digits, the same
    /// for the same seed.
    @Test func everyTransactionHasAnOrderId() {
        let world = ScenarioGenerator.generate(configuration)
        let ordered = world.orders.values.flatMap { $0 }
        #expect(ordered.count == world.transactionVersions.count)
        #expect(Set(ordered) == Set(world.transactionVersions.keys))
        let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        for orderId in world.orders.keys {
            #expect(orderId.count == 10 && orderId.allSatisfy(allowed.contains), "\(orderId)")
        }
        #expect(ScenarioGenerator.generate(configuration).orders == world.orders)
        var other = configuration
        other.seed = 43
        #expect(Set(ScenarioGenerator.generate(other).orders.keys).isDisjoint(with: world.orders.keys))
    }

    /// The fields Apple added since 2024 that the mock fills: one appTransactionId per customer,
    /// offerPeriod with an offer, renewal price and currency, win-back offers after a cancellation.
    @Test func transactionsAndRenewalInfoCarryApplesNewerFields() {
        let world = ScenarioGenerator.generate(configuration)
        for account in world.accounts where !account.transactionIds.isEmpty {
            let ids = Set(account.transactionIds.compactMap { world.transactionVersions[$0]?.last?.payload.appTransactionId })
            #expect(ids.count == 1, "\(account.id)")
        }
        let transactions = world.currentTransactions.values.map(\.payload)
        let offers = transactions.filter { $0.offerType != nil }
        #expect(!offers.isEmpty)
        #expect(offers.allSatisfy { $0.offerPeriod != nil })
        let renewals = world.renewalVersions.values.flatMap { $0 }
        #expect(renewals.allSatisfy { $0.renewalPrice != nil && $0.currency == "USD" && $0.appTransactionId != nil })
        #expect(renewals.contains { $0.eligibleWinBackOfferIds?.isEmpty == false })
    }
}
