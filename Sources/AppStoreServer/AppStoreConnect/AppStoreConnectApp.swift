/// An App Store Connect `App` resource as JSON:API carries it (`{"type": "apps", "id": ...,
/// "attributes": {...}}`), with the attributes the reconciler reads: the notification settings
/// (TN3180), where Apple sends each environment's App Store Server Notifications and in which version.
public struct AppStoreConnectApp: Codable, Hashable, Sendable {
    public var type: String
    /// The app's Apple ID.
    public var id: String
    public var attributes: Attributes

    public init(id: String, attributes: Attributes) {
        self.type = "apps"
        self.id = id
        self.attributes = attributes
    }

    /// The attributes; in a Modify an App request, only those to change (`nil`: unchanged; an
    /// empty URL: none).
    public struct Attributes: Codable, Hashable, Sendable {
        public var bundleId: String?
        /// Production's URL; `nil` or empty: none set.
        public var subscriptionStatusUrl: String?
        /// `V1` or `V2`.
        public var subscriptionStatusUrlVersion: String?
        /// The sandbox's URL; `nil` or empty: Apple sends sandbox notifications to production's.
        public var subscriptionStatusUrlForSandbox: String?
        public var subscriptionStatusUrlVersionForSandbox: String?

        public init(
            bundleId: String? = nil, subscriptionStatusUrl: String? = nil, subscriptionStatusUrlVersion: String? = nil,
            subscriptionStatusUrlForSandbox: String? = nil, subscriptionStatusUrlVersionForSandbox: String? = nil
        ) {
            self.bundleId = bundleId
            self.subscriptionStatusUrl = subscriptionStatusUrl
            self.subscriptionStatusUrlVersion = subscriptionStatusUrlVersion
            self.subscriptionStatusUrlForSandbox = subscriptionStatusUrlForSandbox
            self.subscriptionStatusUrlVersionForSandbox = subscriptionStatusUrlVersionForSandbox
        }

        /// These attributes with those `change` names set (an empty string empties one).
        public func applying(_ change: Attributes) -> Attributes {
            var result = self
            if let url = change.subscriptionStatusUrl { result.subscriptionStatusUrl = url }
            if let version = change.subscriptionStatusUrlVersion { result.subscriptionStatusUrlVersion = version }
            if let url = change.subscriptionStatusUrlForSandbox { result.subscriptionStatusUrlForSandbox = url }
            if let version = change.subscriptionStatusUrlVersionForSandbox { result.subscriptionStatusUrlVersionForSandbox = version }
            return result
        }
    }

    /// `{"data": app}`.
    public struct Document: Codable, Sendable {
        public var data: AppStoreConnectApp
        public init(data: AppStoreConnectApp) { self.data = data }
    }

    /// `{"data": [app, ...]}`.
    public struct ListDocument: Codable, Sendable {
        public var data: [AppStoreConnectApp]
        public init(data: [AppStoreConnectApp]) { self.data = data }
    }
}

/// App Store Connect's error body: `{"errors": [{status, code, title, detail}]}`.
public struct AppStoreConnectErrors: Codable, Hashable, Sendable {
    public struct Item: Codable, Hashable, Sendable {
        public var status: String?
        public var code: String?
        public var title: String?
        public var detail: String?

        public init(status: String?, code: String?, title: String?, detail: String?) {
            self.status = status
            self.code = code
            self.title = title
            self.detail = detail
        }
    }

    public var errors: [Item]

    public init(errors: [Item]) { self.errors = errors }
}
