/// A response that contains the App Store Server Notifications history for your app.
///
/// [NotificationHistoryResponse](https://developer.apple.com/documentation/appstoreserverapi/notificationhistoryresponse)
///
/// It is one page (at most 20 records) of Get Notification History.
public struct NotificationHistoryResponse: Codable, Hashable, Sendable {
    /// A pagination token that you return to the endpoint on a subsequent call to receive the next set of results.
    ///
    /// [paginationToken](https://developer.apple.com/documentation/appstoreserverapi/paginationtoken)
    ///
    /// Loop on ``hasMore``, not on the token's presence.
    public var paginationToken: String?

    /// A Boolean value that indicates whether the App Store has more notification history records.
    ///
    /// [hasMore](https://developer.apple.com/documentation/appstoreserverapi/hasmore)
    public var hasMore: Bool?

    /// The App Store server notification history records.
    ///
    /// [notificationHistoryResponseItem](https://developer.apple.com/documentation/appstoreserverapi/notificationhistoryresponseitem)
    public var notificationHistory: [NotificationHistoryResponseItem]?

    public init(paginationToken: String? = nil, hasMore: Bool? = nil, notificationHistory: [NotificationHistoryResponseItem]? = nil) {
        self.paginationToken = paginationToken
        self.hasMore = hasMore
        self.notificationHistory = notificationHistory
    }
}
