/// The most recent signed transaction and renewal info of one subscription, with its status.
public struct LastTransactionsItem: Codable, Hashable, Sendable {
    public var status: Status?
    public var originalTransactionId: String?
    public var signedTransactionInfo: String?
    public var signedRenewalInfo: String?

    public init(
        status: Status? = nil, originalTransactionId: String? = nil, signedTransactionInfo: String? = nil,
        signedRenewalInfo: String? = nil
    ) {
        self.status = status
        self.originalTransactionId = originalTransactionId
        self.signedTransactionInfo = signedTransactionInfo
        self.signedRenewalInfo = signedRenewalInfo
    }
}
