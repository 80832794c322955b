/// One app in one App Store environment: what signed data must name to belong to it, and what one
/// reconcile run, lease, request budget and schedule are for.
///
/// Apple limits the App Store Server API per app, delivers sandbox notifications to the production
/// URL unless a sandbox URL is set, and signs every notification with its app's `bundleId` and
/// `environment` (and in production its `appAppleId`): a deployment serves several targets, and
/// each row of state belongs to exactly one.
///
/// ```swift
/// let target = AppTarget(bundleId: "com.example.one", environment: .production, appAppleId: 1234567890)
/// print(target)   // com.example.one (Production)
/// ```
public struct AppTarget: Sendable, Hashable, Codable, CustomStringConvertible {
    public var bundleId: String
    public var environment: AppStoreEnvironment
    /// The app's Apple ID; required in production, where notifications carry it.
    public var appAppleId: Int64?

    public init(bundleId: String, environment: AppStoreEnvironment, appAppleId: Int64? = nil) {
        self.bundleId = bundleId
        self.environment = environment
        self.appAppleId = appAppleId
    }

    public var description: String { "\(bundleId) (\(environment.rawValue))" }

    /// Whether signed data naming this bundle id, environment and app Apple ID belongs to the
    /// target: the app Apple ID is checked in production only, as Apple's libraries do.
    public func owns(bundleId: String?, environment: AppStoreEnvironment?, appAppleId: Int64?) -> Bool {
        guard bundleId == self.bundleId, environment == self.environment else { return false }
        return self.environment != .production || appAppleId == self.appAppleId
    }
}
