/// The payload data of a RENEWAL_EXTENSION notification with subtype SUMMARY.
public struct Summary: Codable, Hashable, Sendable {
    public var environment: AppStoreEnvironment?
    public var appAppleId: Int64?
    public var bundleId: String?
    public var productId: String?
    public var requestIdentifier: String?
    public var storefrontCountryCodes: [String]?
    public var succeededCount: Int64?
    public var failedCount: Int64?

    public init(
        environment: AppStoreEnvironment? = nil, appAppleId: Int64? = nil, bundleId: String? = nil,
        productId: String? = nil, requestIdentifier: String? = nil, storefrontCountryCodes: [String]? = nil,
        succeededCount: Int64? = nil, failedCount: Int64? = nil
    ) {
        self.environment = environment
        self.appAppleId = appAppleId
        self.bundleId = bundleId
        self.productId = productId
        self.requestIdentifier = requestIdentifier
        self.storefrontCountryCodes = storefrontCountryCodes
        self.succeededCount = succeededCount
        self.failedCount = failedCount
    }
}
