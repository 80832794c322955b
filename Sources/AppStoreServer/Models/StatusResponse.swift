/// The response of Get All Subscription Statuses.
public struct StatusResponse: Codable, Hashable, Sendable {
    public var environment: AppStoreEnvironment?
    public var bundleId: String?
    public var appAppleId: Int64?
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
