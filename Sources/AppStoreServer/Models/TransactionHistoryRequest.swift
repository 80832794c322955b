/// The query parameters of Get Transaction History (v2).
///
/// [Get Transaction History](https://developer.apple.com/documentation/appstoreserverapi/get-transaction-history)
///
/// Different parameters are ANDed; several values of one parameter are ORed. Pass the stored
/// ``HistoryResponse/revision`` as ``revision`` with the same other parameters to get only what
/// changed since, in ``Order/ascending`` order.
public struct TransactionHistoryRequest: Hashable, Sendable {
    /// The sort order by modification date.
    public struct Order: RawRepresentable, Hashable, Sendable {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        /// The oldest modifications first (`ASCENDING`), the default.
        public static let ascending = Order(rawValue: "ASCENDING")
        /// The newest modifications first (`DESCENDING`).
        public static let descending = Order(rawValue: "DESCENDING")
    }

    /// The product-type filter values (different from the `type` field of a transaction).
    public struct ProductTypeFilter: RawRepresentable, Hashable, Sendable {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        /// Auto-renewable subscriptions (`AUTO_RENEWABLE`).
        public static let autoRenewable = ProductTypeFilter(rawValue: "AUTO_RENEWABLE")
        /// Non-renewing subscriptions (`NON_RENEWABLE`).
        public static let nonRenewable = ProductTypeFilter(rawValue: "NON_RENEWABLE")
        /// Consumable in-app purchases (`CONSUMABLE`).
        public static let consumable = ProductTypeFilter(rawValue: "CONSUMABLE")
        /// Non-consumable in-app purchases (`NON_CONSUMABLE`).
        public static let nonConsumable = ProductTypeFilter(rawValue: "NON_CONSUMABLE")
    }

    /// A token you use in a query to request the next set of transactions for the customer.
    ///
    /// [revision](https://developer.apple.com/documentation/appstoreserverapi/revision)
    public var revision: String?

    /// An optional start date of the timespan, in UNIX milliseconds: only transactions with `purchaseDate >= startDate`.
    ///
    /// [startDate](https://developer.apple.com/documentation/appstoreserverapi/startdate)
    public var startDate: Int64?

    /// An optional end date of the timespan, in UNIX milliseconds: only transactions with `purchaseDate < endDate`.
    ///
    /// [endDate](https://developer.apple.com/documentation/appstoreserverapi/enddate)
    public var endDate: Int64?

    /// An optional filter that indicates the product identifiers to include in the transaction history.
    ///
    /// [productId](https://developer.apple.com/documentation/appstoreserverapi/productid)
    public var productIds: [String]

    /// An optional filter that indicates the product types to include in the transaction history.
    ///
    /// [Get Transaction History](https://developer.apple.com/documentation/appstoreserverapi/get-transaction-history)
    public var productTypes: [ProductTypeFilter]

    /// An optional sort order of the transaction records by their modification date; Apple's default is ascending.
    ///
    /// [Get Transaction History](https://developer.apple.com/documentation/appstoreserverapi/get-transaction-history)
    public var sort: Order?

    /// An optional filter that indicates the subscription group identifiers to include in the transaction history.
    ///
    /// [subscriptionGroupIdentifier](https://developer.apple.com/documentation/appstoreserverapi/subscriptiongroupidentifier)
    public var subscriptionGroupIdentifiers: [String]

    /// An optional filter that limits the transaction history by the in-app ownership type.
    ///
    /// [inAppOwnershipType](https://developer.apple.com/documentation/appstoreserverapi/inappownershiptype)
    public var inAppOwnershipType: InAppOwnershipType?

    /// An optional filter: `true` returns only revoked transactions, `false` only not revoked ones, `nil` both.
    ///
    /// [Get Transaction History](https://developer.apple.com/documentation/appstoreserverapi/get-transaction-history)
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
