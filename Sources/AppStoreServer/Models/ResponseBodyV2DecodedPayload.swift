/// A decoded App Store Server Notification V2 (the payload of `signedPayload`).
///
/// Exactly one of ``data``, ``summary``, ``externalPurchaseToken`` and ``appData`` is present.
/// All dates are UNIX times in milliseconds, as Apple sends them.
public struct ResponseBodyV2DecodedPayload: Codable, Hashable, Sendable {
    /// The in-app purchase event for which the App Store sends this notification.
    public var notificationType: NotificationTypeV2?
    /// Additional information that identifies the event; absent for types without subtypes.
    public var subtype: Subtype?
    /// A unique identifier for the notification. Use it to identify, and ignore, duplicates.
    public var notificationUUID: String?
    /// The version of the notification, `2.0`.
    public var version: String?
    /// The UNIX time, in milliseconds, that the App Store signed the notification.
    public var signedDate: Int64?
    /// The app metadata and the signed renewal and transaction information.
    public var data: NotificationData?
    /// The summary data of a RENEWAL_EXTENSION notification with subtype SUMMARY.
    public var summary: Summary?
    /// The data of an EXTERNAL_PURCHASE_TOKEN notification.
    public var externalPurchaseToken: ExternalPurchaseToken?
    /// The data of a RESCIND_CONSENT notification.
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
