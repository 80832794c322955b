/// The notification settings of an App Store Connect `App` resource (TN3180): where Apple sends
/// each environment's App Store Server Notifications, and in which version.
public struct AppStoreConnectApp: Codable, Hashable, Sendable {
    /// The app's Apple ID (the resource's `id`).
    public var id: String
    public var bundleId: String?
    /// Production's URL; `nil` or empty: none set.
    public var subscriptionStatusUrl: String?
    /// `V1` or `V2`.
    public var subscriptionStatusUrlVersion: String?
    /// The sandbox's URL; `nil` or empty: Apple sends sandbox notifications to production's.
    public var subscriptionStatusUrlForSandbox: String?
    public var subscriptionStatusUrlVersionForSandbox: String?

    public init(
        id: String, bundleId: String? = nil, subscriptionStatusUrl: String? = nil, subscriptionStatusUrlVersion: String? = nil,
        subscriptionStatusUrlForSandbox: String? = nil, subscriptionStatusUrlVersionForSandbox: String? = nil
    ) {
        self.id = id
        self.bundleId = bundleId
        self.subscriptionStatusUrl = subscriptionStatusUrl
        self.subscriptionStatusUrlVersion = subscriptionStatusUrlVersion
        self.subscriptionStatusUrlForSandbox = subscriptionStatusUrlForSandbox
        self.subscriptionStatusUrlVersionForSandbox = subscriptionStatusUrlVersionForSandbox
    }

    /// The attributes as JSON:API carries them.
    public struct Attributes: Codable, Hashable, Sendable {
        public var bundleId: String?
        public var subscriptionStatusUrl: String?
        public var subscriptionStatusUrlVersion: String?
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
    }

    /// One resource of a JSON:API document: `{"type": "apps", "id": ..., "attributes": {...}}`.
    public struct Resource: Codable, Hashable, Sendable {
        public var type: String
        public var id: String
        public var attributes: Attributes?

        public init(type: String = "apps", id: String, attributes: Attributes?) {
            self.type = type
            self.id = id
            self.attributes = attributes
        }
    }

    public init(_ resource: Resource) {
        self.init(
            id: resource.id, bundleId: resource.attributes?.bundleId, subscriptionStatusUrl: resource.attributes?.subscriptionStatusUrl,
            subscriptionStatusUrlVersion: resource.attributes?.subscriptionStatusUrlVersion,
            subscriptionStatusUrlForSandbox: resource.attributes?.subscriptionStatusUrlForSandbox,
            subscriptionStatusUrlVersionForSandbox: resource.attributes?.subscriptionStatusUrlVersionForSandbox)
    }

    public var resource: Resource {
        Resource(
            id: id,
            attributes: Attributes(
                bundleId: bundleId, subscriptionStatusUrl: subscriptionStatusUrl, subscriptionStatusUrlVersion: subscriptionStatusUrlVersion,
                subscriptionStatusUrlForSandbox: subscriptionStatusUrlForSandbox,
                subscriptionStatusUrlVersionForSandbox: subscriptionStatusUrlVersionForSandbox))
    }

    /// `{"data": resource}`.
    public struct Document: Codable, Sendable {
        public var data: Resource
        public init(data: Resource) { self.data = data }
    }

    /// `{"data": [resource, ...]}`.
    public struct ListDocument: Codable, Sendable {
        public var data: [Resource]
        public init(data: [Resource]) { self.data = data }
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
