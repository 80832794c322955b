/// The customer's purchase of the app, signed by the App Store (`signedAppTransactionInfo`): [AppTransaction](https://developer.apple.com/documentation/storekit/apptransaction).
///
/// Its environment is ``receiptType`` and the date it was signed is ``receiptCreationDate``
/// (UNIX milliseconds, like every date here).
public struct AppTransaction: Codable, Hashable, Sendable {
    /// The environment that signed the app transaction.
    public var receiptType: AppStoreEnvironment?
    public var appAppleId: Int64?
    public var bundleId: String?
    public var applicationVersion: String?
    public var versionExternalIdentifier: Int64?
    /// The UNIX time, in milliseconds, that the App Store signed the app transaction.
    public var receiptCreationDate: Int64?
    public var originalPurchaseDate: Int64?
    public var originalApplicationVersion: String?
    public var deviceVerification: String?
    public var deviceVerificationNonce: String?
    public var preorderDate: Int64?
    /// The customer's identifier for this app, shared by all their transactions of the app.
    public var appTransactionId: String?
    public var originalPlatform: String?

    public init(
        receiptType: AppStoreEnvironment? = nil, appAppleId: Int64? = nil, bundleId: String? = nil,
        applicationVersion: String? = nil, versionExternalIdentifier: Int64? = nil, receiptCreationDate: Int64? = nil,
        originalPurchaseDate: Int64? = nil, originalApplicationVersion: String? = nil, deviceVerification: String? = nil,
        deviceVerificationNonce: String? = nil, preorderDate: Int64? = nil, appTransactionId: String? = nil,
        originalPlatform: String? = nil
    ) {
        self.receiptType = receiptType
        self.appAppleId = appAppleId
        self.bundleId = bundleId
        self.applicationVersion = applicationVersion
        self.versionExternalIdentifier = versionExternalIdentifier
        self.receiptCreationDate = receiptCreationDate
        self.originalPurchaseDate = originalPurchaseDate
        self.originalApplicationVersion = originalApplicationVersion
        self.deviceVerification = deviceVerification
        self.deviceVerificationNonce = deviceVerificationNonce
        self.preorderDate = preorderDate
        self.appTransactionId = appTransactionId
        self.originalPlatform = originalPlatform
    }
}
