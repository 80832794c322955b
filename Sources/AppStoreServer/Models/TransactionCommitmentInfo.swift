/// Where a transaction stands in a commitment: [TransactionCommitmentInfo](https://developer.apple.com/documentation/appstoreserverapi/transactioncommitmentinfo).
///
/// Dates are UNIX milliseconds; prices are in milliunits of the transaction's currency.
public struct TransactionCommitmentInfo: Codable, Hashable, Sendable {
    /// The billing period of this transaction within the commitment, from 1.
    public var billingPeriodNumber: Int32?
    public var commitmentExpiresDate: Int64?
    public var commitmentPrice: Int64?
    public var totalBillingPeriods: Int32?

    public init(billingPeriodNumber: Int32? = nil, commitmentExpiresDate: Int64? = nil, commitmentPrice: Int64? = nil,
                totalBillingPeriods: Int32? = nil) {
        self.billingPeriodNumber = billingPeriodNumber
        self.commitmentExpiresDate = commitmentExpiresDate
        self.commitmentPrice = commitmentPrice
        self.totalBillingPeriods = totalBillingPeriods
    }
}
