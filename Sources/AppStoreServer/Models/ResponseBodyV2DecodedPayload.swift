/// A decoded payload containing the version 2 notification data.
///
/// [responseBodyV2DecodedPayload](https://developer.apple.com/documentation/appstoreservernotifications/responsebodyv2decodedpayload)
///
/// It is the payload of `signedPayload`.
/// Exactly one of ``data``, ``summary``, ``externalPurchaseToken`` and ``appData`` is present.
/// All dates are UNIX times in milliseconds, as Apple sends them.
public struct ResponseBodyV2DecodedPayload: Codable, Hashable, Sendable {
    /// The in-app purchase event for which the App Store sends this version 2 notification.
    ///
    /// [notificationType](https://developer.apple.com/documentation/appstoreservernotifications/notificationtype)
    public var notificationType: NotificationTypeV2?

    /// Additional information that identifies the notification event; present only for some notification types.
    ///
    /// [subtype](https://developer.apple.com/documentation/appstoreservernotifications/subtype)
    public var subtype: Subtype?

    /// A unique identifier for the notification; use it to identify, and ignore, duplicates.
    ///
    /// [notificationUUID](https://developer.apple.com/documentation/appstoreservernotifications/notificationuuid)
    public var notificationUUID: String?

    /// A string that indicates the notification's App Store Server Notifications version number, `2.0`.
    ///
    /// [version](https://developer.apple.com/documentation/appstoreservernotifications/version)
    public var version: String?

    /// The UNIX time, in milliseconds, that the App Store signed the JSON Web Signature data.
    ///
    /// [signedDate](https://developer.apple.com/documentation/appstoreserverapi/signeddate)
    public var signedDate: Int64?

    /// The object that contains the app metadata and signed renewal and transaction information.
    ///
    /// [data](https://developer.apple.com/documentation/appstoreservernotifications/data)
    public var data: NotificationData?

    /// The summary data of a RENEWAL_EXTENSION notification with subtype SUMMARY.
    ///
    /// [summary](https://developer.apple.com/documentation/appstoreservernotifications/summary)
    public var summary: Summary?

    /// The external purchase token of an EXTERNAL_PURCHASE_TOKEN notification.
    ///
    /// [externalPurchaseToken](https://developer.apple.com/documentation/appstoreservernotifications/externalpurchasetoken)
    public var externalPurchaseToken: ExternalPurchaseToken?

    /// The app metadata and signed app transaction information of a RESCIND_CONSENT notification.
    ///
    /// [appData](https://developer.apple.com/documentation/appstoreservernotifications/appdata)
    public var appData: AppData?

    public init(
        notificationType: NotificationTypeV2? = nil, subtype: Subtype? = nil, notificationUUID: String? = nil,
        version: String? = "2.0", signedDate: Int64? = nil, data: NotificationData? = nil, summary: Summary? = nil,
        externalPurchaseToken: ExternalPurchaseToken? = nil, appData: AppData? = nil
    ) {
        self.notificationType = notificationType
        self.subtype = subtype
        self.notificationUUID = notificationUUID
        self.version = version
        self.signedDate = signedDate
        self.data = data
        self.summary = summary
        self.externalPurchaseToken = externalPurchaseToken
        self.appData = appData
    }

    /// The app identity and environment the notification claims, taken as Apple's libraries do:
    /// from `data`, else `summary`, else `externalPurchaseToken`, else `appData`.
    public var appIdentity: (bundleId: String?, appAppleId: Int64?, environment: AppStoreEnvironment?) {
        if let data { return (data.bundleId, data.appAppleId, data.environment) }
        if let summary { return (summary.bundleId, summary.appAppleId, summary.environment) }
        if let token = externalPurchaseToken {
            let sandbox = token.externalPurchaseId?.hasPrefix("SANDBOX") ?? false
            return (token.bundleId, token.appAppleId, sandbox ? .sandbox : .production)
        }
        if let appData { return (appData.bundleId, appData.appAppleId, appData.environment) }
        return (nil, nil, nil)
    }
}
