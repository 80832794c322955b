/// One page (at most 20 transactions) of Get Transaction History.
public struct HistoryResponse: Codable, Hashable, Sendable {
    /// The token to pass as `revision` next time; store the one of the last page (``hasMore`` false).
    public var revision: String?
    public var hasMore: Bool?
    public var bundleId: String?
    public var appAppleId: Int64?
    public var environment: AppStoreEnvironment?
    /// Signed transactions (JWS), sorted by modification date; a modified one comes again.
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
