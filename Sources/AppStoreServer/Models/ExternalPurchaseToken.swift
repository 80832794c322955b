/// The payload data of an EXTERNAL_PURCHASE_TOKEN notification.
public struct ExternalPurchaseToken: Codable, Hashable, Sendable {
    /// The unique identifier of the token; it starts with `SANDBOX` in the sandbox environment.
    public var externalPurchaseId: String?
    /// The UNIX time, in milliseconds, when the system created the token.
    public var tokenCreationDate: Int64?
    public var appAppleId: Int64?
    public var bundleId: String?
    /// The type of a custom link token, absent for other tokens (added by Apple in 2025; not in Apple's libraries yet).
    public var tokenType: String?
    /// The UNIX time, in milliseconds, when the token expires.
    public var tokenExpirationDate: Int64?

    public init(
        externalPurchaseId: String? = nil, tokenCreationDate: Int64? = nil, appAppleId: Int64? = nil,
        bundleId: String? = nil, tokenType: String? = nil, tokenExpirationDate: Int64? = nil
    ) {
        self.externalPurchaseId = externalPurchaseId
        self.tokenCreationDate = tokenCreationDate
        self.appAppleId = appAppleId
        self.bundleId = bundleId
        self.tokenType = tokenType
        self.tokenExpirationDate = tokenExpirationDate
    }
}
