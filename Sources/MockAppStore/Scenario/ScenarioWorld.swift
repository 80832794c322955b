public import AppStoreServer

/// Everything a scenario simulated, before signing: accounts, every version of every
/// transaction, and the notifications Apple sent, each with the snapshot it carried.
public struct ScenarioWorld: Sendable {
    /// One version of a transaction, as of `modifiedAt` (creation, upgrade, revocation...).
    public struct TransactionVersion: Sendable {
        public var payload: JWSTransactionDecodedPayload
        public var modifiedAt: Int64
    }

    /// One notification, with the transaction and renewal info it carries (unsigned), or for the
    /// kinds without `data`, its summary, external purchase token or app transaction.
    public struct PlannedNotification: Sendable {
        public var notificationUUID: String
        public var notificationType: NotificationTypeV2
        public var subtype: Subtype?
        public var signedDate: Int64
        public var accountId: String?
        public var originalTransactionId: String?
        public var transaction: JWSTransactionDecodedPayload?
        public var renewalInfo: JWSRenewalInfoDecodedPayload?
        public var status: Status?
        public var consumptionRequestReason: ConsumptionRequestReason?
        /// RENEWAL_EXTENSION/SUMMARY: the payload's `summary` instead of `data`.
        public var summary: Summary?
        /// EXTERNAL_PURCHASE_TOKEN: the payload's `externalPurchaseToken` instead of `data`.
        public var externalPurchaseToken: ExternalPurchaseToken?
        /// RESCIND_CONSENT: the app transaction signed into the payload's `appData`.
        public var appTransaction: AppTransaction?

        /// Whether the payload carries `data` (the kinds with `summary`, `externalPurchaseToken` or
        /// `appData` carry no purchase).
        public var carriesData: Bool { summary == nil && externalPurchaseToken == nil && appTransaction == nil }
    }

    /// A customer's App Store account; its transaction history spans all its purchases.
    public struct Account: Sendable {
        public var id: String
        public var transactionIds: [String] = []
    }

    public var accounts: [Account] = []
    /// Versions of each transaction, oldest first.
    public var transactionVersions: [String: [TransactionVersion]] = [:]
    /// Versions of each subscription's renewal info (by originalTransactionId), oldest first.
    public var renewalVersions: [String: [JWSRenewalInfoDecodedPayload]] = [:]
    /// The status of each subscription now (by originalTransactionId).
    public var subscriptionStatus: [String: Status] = [:]
    /// Which account owns each transaction.
    public var accountOfTransaction: [String: String] = [:]
    /// Notifications, ordered by signedDate.
    public var notifications: [PlannedNotification] = []
    /// The transactions of each order ID (the ID on the customer's receipt email), for Look Up Order ID.
    public var orders: [String: [String]] = [:]
    /// How long each non-renewing subscription the scenario sold lasts, by product ID (ms): the
    /// app's own knowledge, since Apple sends no expiry for them.
    public var nonRenewingTerms: [String: Int64] = [:]

    /// The newest version of every transaction.
    public var currentTransactions: [String: TransactionVersion] {
        transactionVersions.compactMapValues(\.last)
    }
}
