/// What happens when a commitment ends: [RenewalCommitmentInfo](https://developer.apple.com/documentation/appstoreserverapi/renewalcommitmentinfo).
///
/// Dates are UNIX milliseconds; prices are in milliunits of the renewal info's currency.
public struct RenewalCommitmentInfo: Codable, Hashable, Sendable {
    public var commitmentAutoRenewProductId: String?
    public var commitmentAutoRenewStatus: AutoRenewStatus?
    public var commitmentRenewalBillingPlanType: RenewalBillingPlanType?
    public var commitmentRenewalDate: Int64?
    public var commitmentRenewalPrice: Int64?

    public init(commitmentAutoRenewProductId: String? = nil, commitmentAutoRenewStatus: AutoRenewStatus? = nil,
                commitmentRenewalBillingPlanType: RenewalBillingPlanType? = nil, commitmentRenewalDate: Int64? = nil,
                commitmentRenewalPrice: Int64? = nil) {
        self.commitmentAutoRenewProductId = commitmentAutoRenewProductId
        self.commitmentAutoRenewStatus = commitmentAutoRenewStatus
        self.commitmentRenewalBillingPlanType = commitmentRenewalBillingPlanType
        self.commitmentRenewalDate = commitmentRenewalDate
        self.commitmentRenewalPrice = commitmentRenewalPrice
    }
}
