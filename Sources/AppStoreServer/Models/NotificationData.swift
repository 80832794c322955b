/// The app metadata and the signed renewal and transaction information of a notification.
public struct NotificationData: Codable, Hashable, Sendable {
    /// The unique identifier of the app; absent in the sandbox environment.
    public var appAppleId: Int64?
    /// The bundle identifier of the app.
    public var bundleId: String?
    /// The version of the build that identifies an iteration of the bundle.
    public var bundleVersion: String?
    /// The server environment that the notification applies to.
    public var environment: AppStoreEnvironment?
    /// Transaction information signed by the App Store (JWS).
    public var signedTransactionInfo: String?
    /// Subscription renewal information signed by the App Store (JWS); auto-renewables only.
    public var signedRenewalInfo: String?
    /// The status of the auto-renewable subscription as of the notification's `signedDate`.
    public var status: Status?
    /// The reason the customer requested the refund (CONSUMPTION_REQUEST only).
    public var consumptionRequestReason: ConsumptionRequestReason?

    public init(
        appAppleId: Int64? = nil, bundleId: String? = nil, bundleVersion: String? = nil,
        environment: AppStoreEnvironment? = nil, signedTransactionInfo: String? = nil,
        signedRenewalInfo: String? = nil, status: Status? = nil,
        consumptionRequestReason: ConsumptionRequestReason? = nil
    ) {
        self.appAppleId = appAppleId
        self.bundleId = bundleId
        self.bundleVersion = bundleVersion
        self.environment = environment
        self.signedTransactionInfo = signedTransactionInfo
        self.signedRenewalInfo = signedRenewalInfo
        self.status = status
        self.consumptionRequestReason = consumptionRequestReason
    }
}
