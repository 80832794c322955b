/// A decoded payload that contains app transaction information.
///
/// [JWSAppTransactionDecodedPayload](https://developer.apple.com/documentation/appstoreserverapi/jwsapptransactiondecodedpayload),
/// [AppTransaction](https://developer.apple.com/documentation/storekit/apptransaction)
///
/// It is the customer's purchase of the app, signed by the App Store (`signedAppTransactionInfo`).
/// Its environment is ``receiptType`` and the date it was signed is ``receiptCreationDate``
/// (UNIX milliseconds, like every date here).
public struct AppTransaction: Codable, Hashable, Sendable {
    /// The server environment that signed the app transaction.
    ///
    /// [environment](https://developer.apple.com/documentation/appstoreserverapi/environment)
    public var receiptType: AppStoreEnvironment?

    /// The unique identifier the App Store uses to identify the app.
    ///
    /// [appAppleId](https://developer.apple.com/documentation/appstoreserverapi/appappleid)
    public var appAppleId: Int64?

    /// The bundle identifier that the app transaction applies to.
    ///
    /// [bundleId](https://developer.apple.com/documentation/appstoreserverapi/bundleid)
    public var bundleId: String?

    /// The app version that the app transaction applies to.
    ///
    /// [appVersion](https://developer.apple.com/documentation/storekit/apptransaction/appversion)
    public var applicationVersion: String?

    /// The version external identifier of the app.
    ///
    /// [appVersionID](https://developer.apple.com/documentation/storekit/apptransaction/appversionid)
    public var versionExternalIdentifier: Int64?

    /// The UNIX time, in milliseconds, that the App Store signed the app transaction.
    ///
    /// [receiptCreationDate](https://developer.apple.com/documentation/appstoreserverapi/receiptcreationdate)
    public var receiptCreationDate: Int64?

    /// The UNIX time, in milliseconds, that the customer originally purchased the app from the App Store.
    ///
    /// [originalPurchaseDate](https://developer.apple.com/documentation/appstoreserverapi/originalpurchasedate)
    public var originalPurchaseDate: Int64?

    /// The app version that the customer originally purchased from the App Store.
    ///
    /// [originalAppVersion](https://developer.apple.com/documentation/appstoreserverapi/originalapplicationversion)
    public var originalApplicationVersion: String?

    /// The Base64 device verification value to use to verify whether the app transaction belongs to the device.
    ///
    /// [deviceVerification](https://developer.apple.com/documentation/storekit/apptransaction/deviceverification)
    public var deviceVerification: String?

    /// The UUID used to compute the device verification value.
    ///
    /// [deviceVerificationNonce](https://developer.apple.com/documentation/storekit/apptransaction/deviceverificationnonce)
    public var deviceVerificationNonce: String?

    /// The UNIX time, in milliseconds, that the customer placed an order for the app before it was available in the App Store.
    ///
    /// [preorderDate](https://developer.apple.com/documentation/appstoreserverapi/preorderdate)
    public var preorderDate: Int64?

    /// The unique identifier of the app download transaction.
    ///
    /// [appTransactionId](https://developer.apple.com/documentation/appstoreserverapi/apptransactionid)
    ///
    /// It is the customer's identifier for this app, shared by all their transactions of the app.
    public var appTransactionId: String?

    /// The platform on which the customer originally purchased the app.
    ///
    /// [originalPlatform](https://developer.apple.com/documentation/appstoreserverapi/originalplatform)
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
