/// The app metadata and signed app transaction of a RESCIND_CONSENT notification.
public struct AppData: Codable, Hashable, Sendable {
    public var appAppleId: Int64?
    public var bundleId: String?
    public var environment: AppStoreEnvironment?
    /// App transaction information signed by the App Store (JWS).
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
