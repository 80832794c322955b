/// The query parameters of Get Transaction History (v2).
///
/// Different parameters are ANDed; several values of one parameter are ORed. Pass the stored
/// ``HistoryResponse/revision`` as ``revision`` with the same other parameters to get only what
/// changed since, in ``Order/ascending`` order.
public struct TransactionHistoryRequest: Hashable, Sendable {
    /// The sort order by modification date.
    public struct Order: RawRepresentable, Hashable, Sendable {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public static let ascending = Order(rawValue: "ASCENDING")
        public static let descending = Order(rawValue: "DESCENDING")
    }

    /// The product-type filter values (different from the `type` field of a transaction).
    public struct ProductTypeFilter: RawRepresentable, Hashable, Sendable {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public static let autoRenewable = ProductTypeFilter(rawValue: "AUTO_RENEWABLE")
        public static let nonRenewable = ProductTypeFilter(rawValue: "NON_RENEWABLE")
        public static let consumable = ProductTypeFilter(rawValue: "CONSUMABLE")
        public static let nonConsumable = ProductTypeFilter(rawValue: "NON_CONSUMABLE")
    }

    public var revision: String?
    /// Include transactions with `purchaseDate >= startDate` (UNIX ms).
    public var startDate: Int64?
    /// Include transactions with `purchaseDate < endDate` (UNIX ms).
    public var endDate: Int64?
    public var productIds: [String]
    public var productTypes: [ProductTypeFilter]
    public var sort: Order?
    public var subscriptionGroupIdentifiers: [String]
    public var inAppOwnershipType: InAppOwnershipType?
    /// `true`: only revoked transactions; `false`: only not revoked; `nil`: both.
    public var revoked: Bool?

    public init(
        revision: String? = nil, startDate: Int64? = nil, endDate: Int64? = nil, productIds: [String] = [],
        productTypes: [ProductTypeFilter] = [], sort: Order? = .ascending, subscriptionGroupIdentifiers: [String] = [],
        inAppOwnershipType: InAppOwnershipType? = nil, revoked: Bool? = nil
    ) {
        self.revision = revision
        self.startDate = startDate
        self.endDate = endDate
        self.productIds = productIds
        self.productTypes = productTypes
        self.sort = sort
        self.subscriptionGroupIdentifiers = subscriptionGroupIdentifiers
        self.inAppOwnershipType = inAppOwnershipType
        self.revoked = revoked
    }

    /// The query items in Apple's names; multi-value filters repeat their parameter.
    public var queryItems: [(name: String, value: String)] {
        var items: [(name: String, value: String)] = []
        if let revision { items.append(("revision", revision)) }
        if let startDate { items.append(("startDate", String(startDate))) }
        if let endDate { items.append(("endDate", String(endDate))) }
        items += productIds.map { ("productId", $0) }
        items += productTypes.map { ("productType", $0.rawValue) }
        if let sort { items.append(("sort", sort.rawValue)) }
        items += subscriptionGroupIdentifiers.map { ("subscriptionGroupIdentifier", $0) }
        if let inAppOwnershipType { items.append(("inAppOwnershipType", inAppOwnershipType.rawValue)) }
        if let revoked { items.append(("revoked", revoked ? "true" : "false")) }
        return items
    }
}
