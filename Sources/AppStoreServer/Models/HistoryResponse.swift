/// A response that contains the customer's transaction history for an app.
///
/// [HistoryResponse](https://developer.apple.com/documentation/appstoreserverapi/historyresponse)
///
/// It is one page (at most 20 transactions) of Get Transaction History.
public struct HistoryResponse: Codable, Hashable, Sendable {
    /// A token you use in a query to request the next set of transactions for the customer.
    ///
    /// [revision](https://developer.apple.com/documentation/appstoreserverapi/revision)
    ///
    /// Pass it as `revision` next time; store the one of the last page (``hasMore`` false).
    public var revision: String?

    /// A Boolean value that indicates whether the App Store has more transactions for the query.
    ///
    /// [hasMore](https://developer.apple.com/documentation/appstoreserverapi/hasmore)
    public var hasMore: Bool?

    /// The bundle identifier of an app.
    ///
    /// [bundleId](https://developer.apple.com/documentation/appstoreserverapi/bundleid)
    public var bundleId: String?

    /// The unique identifier of an app in the App Store.
    ///
    /// [appAppleId](https://developer.apple.com/documentation/appstoreservernotifications/appappleid)
    public var appAppleId: Int64?

    /// The server environment in which you're making the request, whether sandbox or production.
    ///
    /// [environment](https://developer.apple.com/documentation/appstoreserverapi/environment)
    public var environment: AppStoreEnvironment?

    /// The customer's in-app purchase transactions, signed by Apple, in JSON Web Signature (JWS) format.
    ///
    /// [JWSTransaction](https://developer.apple.com/documentation/appstoreserverapi/jwstransaction)
    ///
    /// They are sorted by modification date; a modified transaction comes again.
    public var signedTransactions: [String]?

    public init(
        revision: String? = nil, hasMore: Bool? = nil, bundleId: String? = nil, appAppleId: Int64? = nil,
        environment: AppStoreEnvironment? = nil, signedTransactions: [String]? = nil
    ) {
        self.revision = revision
        self.hasMore = hasMore
        self.bundleId = bundleId
        self.appAppleId = appAppleId
        self.environment = environment
        self.signedTransactions = signedTransactions
    }
}
