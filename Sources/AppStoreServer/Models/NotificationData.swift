/// The app metadata and the signed renewal and transaction information.
///
/// [data](https://developer.apple.com/documentation/appstoreservernotifications/data)
///
/// It is the payload of every in-app purchase notification except RENEWAL_EXTENSION with subtype
/// SUMMARY, EXTERNAL_PURCHASE_TOKEN and RESCIND_CONSENT.
public struct NotificationData: Codable, Hashable, Sendable {
    /// The unique identifier of an app in the App Store; absent in the sandbox environment.
    ///
    /// [appAppleId](https://developer.apple.com/documentation/appstoreservernotifications/appappleid)
    public var appAppleId: Int64?

    /// The bundle identifier of an app.
    ///
    /// [bundleId](https://developer.apple.com/documentation/appstoreserverapi/bundleid)
    public var bundleId: String?

    /// The version of the build that identifies an iteration of the bundle.
    ///
    /// [bundleVersion](https://developer.apple.com/documentation/appstoreservernotifications/bundleversion)
    public var bundleVersion: String?

    /// The server environment that the notification applies to, either sandbox or production.
    ///
    /// [environment](https://developer.apple.com/documentation/appstoreservernotifications/environment)
    public var environment: AppStoreEnvironment?

    /// Transaction information signed by the App Store, in JSON Web Signature (JWS) format.
    ///
    /// [JWSTransaction](https://developer.apple.com/documentation/appstoreserverapi/jwstransaction)
    public var signedTransactionInfo: String?

    /// Subscription renewal information, signed by the App Store, in JSON Web Signature (JWS) format; auto-renewable subscriptions only.
    ///
    /// [JWSRenewalInfo](https://developer.apple.com/documentation/appstoreserverapi/jwsrenewalinfo)
    public var signedRenewalInfo: String?

    /// The status of an auto-renewable subscription as of the ``ResponseBodyV2DecodedPayload/signedDate`` of the notification.
    ///
    /// [status](https://developer.apple.com/documentation/appstoreservernotifications/status)
    public var status: Status?

    /// The reason the customer requested the refund; CONSUMPTION_REQUEST notifications only.
    ///
    /// [consumptionRequestReason](https://developer.apple.com/documentation/appstoreservernotifications/consumptionrequestreason)
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
