/// One page (at most 20 records) of Get Notification History.
public struct NotificationHistoryResponse: Codable, Hashable, Sendable {
    /// The token for the next page; loop on ``hasMore``, not on the token's presence.
    public var paginationToken: String?
    public var hasMore: Bool?
    public var notificationHistory: [NotificationHistoryResponseItem]?

    public init(paginationToken: String? = nil, hasMore: Bool? = nil, notificationHistory: [NotificationHistoryResponseItem]? = nil) {
        self.paginationToken = paginationToken
        self.hasMore = hasMore
        self.notificationHistory = notificationHistory
    }
}
