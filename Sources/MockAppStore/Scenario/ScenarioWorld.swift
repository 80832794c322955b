package import AppStoreServer

/// Everything a scenario simulated, before signing: accounts, every version of every
/// transaction, and the notifications Apple sent, each with the snapshot it carried.
package struct ScenarioWorld: Sendable {
    /// One version of a transaction, as of `modifiedAt` (creation, upgrade, revocation...).
    package struct TransactionVersion: Sendable {
        package var payload: JWSTransactionDecodedPayload
        package var modifiedAt: Int64
    }

    /// One notification, with the transaction and renewal info it carries (unsigned), or for the
    /// kinds without `data`, its summary, external purchase token or app transaction.
    package struct PlannedNotification: Sendable {
        package var notificationUUID: String
        package var notificationType: NotificationTypeV2
        package var subtype: Subtype?
        package var signedDate: Int64
        package var accountId: String?
        package var originalTransactionId: String?
        package var transaction: JWSTransactionDecodedPayload?
        package var renewalInfo: JWSRenewalInfoDecodedPayload?
        package var status: Status?
        package var consumptionRequestReason: ConsumptionRequestReason?
        /// RENEWAL_EXTENSION/SUMMARY: the payload's `summary` instead of `data`.
        package var summary: Summary?
        /// EXTERNAL_PURCHASE_TOKEN: the payload's `externalPurchaseToken` instead of `data`.
        package var externalPurchaseToken: ExternalPurchaseToken?
        /// RESCIND_CONSENT: the app transaction signed into the payload's `appData`.
        package var appTransaction: AppTransaction?

        /// Whether the payload carries `data` (the kinds with `summary`, `externalPurchaseToken` or
        /// `appData` carry no purchase).
        package var carriesData: Bool { summary == nil && externalPurchaseToken == nil && appTransaction == nil }
    }

    /// A customer's App Store account; its transaction history spans all its purchases.
    package struct Account: Sendable {
        package var id: String
        package var transactionIds: [String] = []
    }

    package var accounts: [Account] = []
    /// Versions of each transaction, oldest first.
    package var transactionVersions: [String: [TransactionVersion]] = [:]
    /// Versions of each subscription's renewal info (by originalTransactionId), oldest first.
    package var renewalVersions: [String: [JWSRenewalInfoDecodedPayload]] = [:]
    /// The status of each subscription now (by originalTransactionId).
    package var subscriptionStatus: [String: Status] = [:]
    /// Each subscription's status and renewal info over time (by originalTransactionId), oldest
    /// first: what Get All Subscription Statuses serves while the API lags
    /// (``FaultConfiguration/apiLagMilliseconds``). Written by ``recordSubscription(_:status:renewal:at:)``.
    package var subscriptionVersions: [String: [SubscriptionVersion]] = [:]
    /// Which account owns each transaction.
    package var accountOfTransaction: [String: String] = [:]
    /// Notifications, ordered by signedDate.
    package var notifications: [PlannedNotification] = []
    /// The transactions of each order ID (the ID on the customer's receipt email), for Look Up Order ID.
    package var orders: [String: [String]] = [:]
    /// How long each non-renewing subscription the scenario sold lasts, by product ID (ms): the
    /// app's own knowledge, since Apple sends no expiry for them.
    package var nonRenewingTerms: [String: Int64] = [:]

    /// A subscription's status and renewal info from `modifiedAt` (UNIX ms) on.
    package struct SubscriptionVersion: Sendable {
        package var status: Status
        package var renewal: JWSRenewalInfoDecodedPayload?
        package var modifiedAt: Int64
    }

    /// Records a subscription's status and, when given, a new version of its renewal info, as of
    /// `time`: they become its current ones, and Get All Subscription Statuses serves them to a
    /// lagging read from `time` on.
    package mutating func recordSubscription(
        _ originalTransactionId: String, status: Status, renewal: JWSRenewalInfoDecodedPayload?, at time: Int64
    ) {
        if let renewal { renewalVersions[originalTransactionId, default: []].append(renewal) }
        subscriptionStatus[originalTransactionId] = status
        subscriptionVersions[originalTransactionId, default: []].append(
            .init(status: status, renewal: renewalVersions[originalTransactionId]?.last, modifiedAt: time))
    }

    /// A subscription's status and renewal info as Apple's API serves them at `asOf` (UNIX ms): the
    /// last recorded by then, else (nothing recorded that early) the current ones.
    package func subscription(_ originalTransactionId: String, asOf: Int64) -> (status: Status, renewal: JWSRenewalInfoDecodedPayload?) {
        if let version = subscriptionVersions[originalTransactionId]?.last(where: { $0.modifiedAt <= asOf }) {
            return (version.status, version.renewal)
        }
        return (subscriptionStatus[originalTransactionId] ?? .active, renewalVersions[originalTransactionId]?.last)
    }

    /// The newest version of every transaction.
    package var currentTransactions: [String: TransactionVersion] {
        transactionVersions.compactMapValues(\.last)
    }
}
