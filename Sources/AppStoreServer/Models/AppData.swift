/// The object that contains the app metadata and signed app transaction information.
///
/// [appData](https://developer.apple.com/documentation/appstoreservernotifications/appdata)
///
/// It is the payload of a RESCIND_CONSENT notification.
public struct AppData: Codable, Hashable, Sendable {
    /// The unique identifier of the app that the notification applies to.
    ///
    /// [appAppleId](https://developer.apple.com/documentation/appstoreservernotifications/appappleid)
    public var appAppleId: Int64?

    /// The bundle identifier of the app.
    ///
    /// [bundleId](https://developer.apple.com/documentation/appstoreservernotifications/bundleid)
    public var bundleId: String?

    /// The server environment that the notification applies to, either sandbox or production.
    ///
    /// [environment](https://developer.apple.com/documentation/appstoreservernotifications/environment)
    public var environment: AppStoreEnvironment?

    /// App transaction information signed by the App Store, in JSON Web Signature (JWS) format.
    ///
    /// [JWSAppTransaction](https://developer.apple.com/documentation/appstoreservernotifications/jwsapptransaction)
    public var signedAppTransactionInfo: String?

    public init(
        appAppleId: Int64? = nil, bundleId: String? = nil, environment: AppStoreEnvironment? = nil,
        signedAppTransactionInfo: String? = nil
    ) {
        self.appAppleId = appAppleId
        self.bundleId = bundleId
        self.environment = environment
        self.signedAppTransactionInfo = signedAppTransactionInfo
    }
}
