/// What happens when a commitment ends.
///
/// [RenewalCommitmentInfo](https://developer.apple.com/documentation/appstoreserverapi/renewalcommitmentinfo)
///
/// Dates are UNIX milliseconds; prices are in milliunits of the renewal info's currency.
public struct RenewalCommitmentInfo: Codable, Hashable, Sendable {
    /// The product identifier of the product that renews when the commitment ends.
    ///
    /// [commitmentAutoRenewProductId](https://developer.apple.com/documentation/appstoreserverapi/commitmentautorenewproductid)
    public var commitmentAutoRenewProductId: String?

    /// Whether the subscription renews automatically when the commitment ends.
    ///
    /// [commitmentAutoRenewStatus](https://developer.apple.com/documentation/appstoreserverapi/commitmentautorenewstatus)
    public var commitmentAutoRenewStatus: AutoRenewStatus?

    /// How the renewal after the commitment is billed.
    ///
    /// [commitmentRenewalBillingPlanType](https://developer.apple.com/documentation/appstoreserverapi/commitmentrenewalbillingplantype)
    public var commitmentRenewalBillingPlanType: RenewalBillingPlanType?

    /// The UNIX time, in milliseconds, when the commitment renews.
    ///
    /// [commitmentRenewalDate](https://developer.apple.com/documentation/appstoreserverapi/commitmentrenewaldate)
    public var commitmentRenewalDate: Int64?

    /// The price of the renewal after the commitment, in milliunits of the renewal info's currency.
    ///
    /// [commitmentRenewalPrice](https://developer.apple.com/documentation/appstoreserverapi/commitmentrenewalprice)
    public var commitmentRenewalPrice: Int64?

    public init(
        commitmentAutoRenewProductId: String? = nil, commitmentAutoRenewStatus: AutoRenewStatus? = nil,
        commitmentRenewalBillingPlanType: RenewalBillingPlanType? = nil, commitmentRenewalDate: Int64? = nil,
        commitmentRenewalPrice: Int64? = nil
    ) {
        self.commitmentAutoRenewProductId = commitmentAutoRenewProductId
        self.commitmentAutoRenewStatus = commitmentAutoRenewStatus
        self.commitmentRenewalBillingPlanType = commitmentRenewalBillingPlanType
        self.commitmentRenewalDate = commitmentRenewalDate
        self.commitmentRenewalPrice = commitmentRenewalPrice
    }
}
