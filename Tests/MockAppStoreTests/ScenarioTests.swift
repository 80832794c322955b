import AppStoreServer
import Foundation
@testable import MockAppStore
import Testing

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
            #expect(notification.transaction?.environment == .production)
            #expect(notification.transaction?.bundleId == configuration.bundleId)
        }
        #expect(Set(world.notifications.map(\.notificationUUID)).count == world.notifications.count)
    }

    @Test func theOutageHoldsEveryKindOfEventARunMustRecover() {
        let world = ScenarioGenerator.generate(configuration)
        let inOutage = Set(world.notifications.filter { configuration.isInOutage($0.signedDate) }
            .map { notification in
                notification.subtype.map { "\(notification.notificationType.rawValue)/\($0.rawValue)" } ?? notification.notificationType.rawValue
            })
        for expected in ["DID_RENEW", "DID_RENEW/BILLING_RECOVERY", "EXPIRED/VOLUNTARY", "EXPIRED/BILLING_RETRY", "EXPIRED/PRICE_INCREASE",
                         "EXPIRED/PRODUCT_NOT_FOR_SALE", "EXPIRED", "REFUND", "REVOKE", "GRACE_PERIOD_EXPIRED", "DID_FAIL_TO_RENEW",
                         "DID_FAIL_TO_RENEW/GRACE_PERIOD", "FUTURE_NOTIFICATION_TYPE", "FUTURE_NOTIFICATION_TYPE/FUTURE_SUBTYPE",
                         "DID_CHANGE_RENEWAL_PREF/UPGRADE", "DID_CHANGE_RENEWAL_PREF/DOWNGRADE", "ONE_TIME_CHARGE"] {
            #expect(inOutage.contains(expected), "\(expected) missing from the outage")
        }
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
            #expect(state.lastSignedDate == world.notifications.filter { $0.originalTransactionId == state.originalTransactionId }.map(\.signedDate).max())
        }
        // Upgrades exist, and the upgraded transaction is never the latest.
        let upgraded = world.currentTransactions.values.filter { $0.payload.isUpgraded == true }.compactMap(\.payload.transactionId)
        #expect(!upgraded.isEmpty)
        #expect(Set(truth.compactMap(\.latestTransactionId)).isDisjoint(with: upgraded))
    }
}
