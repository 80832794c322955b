/// A response that contains status information for all of a customer's auto-renewable subscriptions in your app.
///
/// [StatusResponse](https://developer.apple.com/documentation/appstoreserverapi/statusresponse)
///
/// It is the response of Get All Subscription Statuses.
public struct StatusResponse: Codable, Hashable, Sendable {
    /// The server environment, sandbox or production, in which the App Store generated the response.
    ///
    /// [environment](https://developer.apple.com/documentation/appstoreserverapi/environment)
    public var environment: AppStoreEnvironment?

    /// The bundle identifier of an app.
    ///
    /// [bundleId](https://developer.apple.com/documentation/appstoreserverapi/bundleid)
    public var bundleId: String?

    /// The unique identifier of an app in the App Store.
    ///
    /// [appAppleId](https://developer.apple.com/documentation/appstoreservernotifications/appappleid)
    public var appAppleId: Int64?

    /// The customer's auto-renewable subscriptions by subscription group, with their signed transaction and renewal information.
    ///
    /// [SubscriptionGroupIdentifierItem](https://developer.apple.com/documentation/appstoreserverapi/subscriptiongroupidentifieritem)
    public var data: [SubscriptionGroupIdentifierItem]?

    public init(
        environment: AppStoreEnvironment? = nil, bundleId: String? = nil, appAppleId: Int64? = nil,
        data: [SubscriptionGroupIdentifierItem]? = nil
    ) {
        self.environment = environment
        self.bundleId = bundleId
        self.appAppleId = appAppleId
        self.data = data
    }
}
