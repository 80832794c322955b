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
    /// Which account owns each transaction.
    package var accountOfTransaction: [String: String] = [:]
    /// Notifications, ordered by signedDate.
    package var notifications: [PlannedNotification] = []
    /// The transactions of each order ID (the ID on the customer's receipt email), for Look Up Order ID.
    package var orders: [String: [String]] = [:]
    /// How long each non-renewing subscription the scenario sold lasts, by product ID (ms): the
    /// app's own knowledge, since Apple sends no expiry for them.
    package var nonRenewingTerms: [String: Int64] = [:]

    /// The newest version of every transaction.
    package var currentTransactions: [String: TransactionVersion] {
        transactionVersions.compactMapValues(\.last)
    }
}
