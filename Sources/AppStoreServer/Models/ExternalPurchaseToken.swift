/// The payload data that contains an external purchase token.
///
/// [externalPurchaseToken](https://developer.apple.com/documentation/appstoreservernotifications/externalpurchasetoken)
///
/// It is the payload of an EXTERNAL_PURCHASE_TOKEN notification.
public struct ExternalPurchaseToken: Codable, Hashable, Sendable {
    /// The field of an external purchase token that uniquely identifies the token.
    ///
    /// [externalPurchaseId](https://developer.apple.com/documentation/appstoreservernotifications/externalpurchaseid)
    ///
    /// It starts with `SANDBOX` in the sandbox environment.
    public var externalPurchaseId: String?

    /// The field of an external purchase token that contains the UNIX time, in milliseconds, when the system created the token.
    ///
    /// [tokenCreationDate](https://developer.apple.com/documentation/appstoreservernotifications/tokencreationdate)
    public var tokenCreationDate: Int64?

    /// The unique identifier of an app in the App Store.
    ///
    /// [appAppleId](https://developer.apple.com/documentation/appstoreservernotifications/appappleid)
    public var appAppleId: Int64?

    /// The bundle identifier of an app.
    ///
    /// [bundleId](https://developer.apple.com/documentation/appstoreservernotifications/bundleid)
    public var bundleId: String?

    /// The type of an external purchase custom link token; present only for custom link tokens.
    ///
    /// [tokenType](https://developer.apple.com/documentation/appstoreservernotifications/tokentype)
    ///
    /// Apple added it in 2025; Apple's libraries don't have it yet.
    public var tokenType: String?

    /// The field of a custom link token that contains the UNIX time, in milliseconds, when the token expires.
    ///
    /// [tokenExpirationDate](https://developer.apple.com/documentation/appstoreservernotifications/tokenexpirationdate)
    ///
    /// Apple added it in 2025; Apple's libraries don't have it yet.
    public var tokenExpirationDate: Int64?

    public init(
        externalPurchaseId: String? = nil, tokenCreationDate: Int64? = nil, appAppleId: Int64? = nil,
        bundleId: String? = nil, tokenType: String? = nil, tokenExpirationDate: Int64? = nil
    ) {
        self.externalPurchaseId = externalPurchaseId
        self.tokenCreationDate = tokenCreationDate
        self.appAppleId = appAppleId
        self.bundleId = bundleId
        self.tokenType = tokenType
        self.tokenExpirationDate = tokenExpirationDate
    }
}
