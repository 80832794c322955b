/// Where a transaction stands in a commitment.
///
/// [TransactionCommitmentInfo](https://developer.apple.com/documentation/appstoreserverapi/transactioncommitmentinfo)
///
/// Dates are UNIX milliseconds; prices are in milliunits of the transaction's currency.
public struct TransactionCommitmentInfo: Codable, Hashable, Sendable {
    /// The billing period of this transaction within the commitment, from 1.
    ///
    /// [billingPeriodNumber](https://developer.apple.com/documentation/appstoreserverapi/billingperiodnumber)
    public var billingPeriodNumber: Int32?

    /// The UNIX time, in milliseconds, when the commitment expires.
    ///
    /// [commitmentExpiresDate](https://developer.apple.com/documentation/appstoreserverapi/commitmentexpiresdate)
    public var commitmentExpiresDate: Int64?

    /// The price of the commitment, in milliunits of the transaction's currency.
    ///
    /// [commitmentPrice](https://developer.apple.com/documentation/appstoreserverapi/commitmentprice)
    public var commitmentPrice: Int64?

    /// The number of billing periods in the commitment.
    ///
    /// [totalBillingPeriods](https://developer.apple.com/documentation/appstoreserverapi/totalbillingperiods)
    public var totalBillingPeriods: Int32?

    public init(
        billingPeriodNumber: Int32? = nil, commitmentExpiresDate: Int64? = nil, commitmentPrice: Int64? = nil,
        totalBillingPeriods: Int32? = nil
    ) {
        self.billingPeriodNumber = billingPeriodNumber
        self.commitmentExpiresDate = commitmentExpiresDate
        self.commitmentPrice = commitmentPrice
        self.totalBillingPeriods = totalBillingPeriods
    }
}
