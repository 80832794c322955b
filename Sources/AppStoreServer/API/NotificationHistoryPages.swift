/// The pages of one Get Notification History query, as an `AsyncSequence` that fetches a page
/// only when the previous one has been consumed, so memory does not grow with the outage.
///
/// Every page is requested with the same body; the sequence ends after the page whose
/// `hasMore` is false. A page that says `hasMore` without a token is an invalid response.
public struct NotificationHistoryPages: AsyncSequence, Sendable {
    public typealias Element = NotificationHistoryPage

    let client: AppStoreServerAPIClient
    let request: NotificationHistoryRequest
    let firstToken: String?

    public struct AsyncIterator: AsyncIteratorProtocol {
        let client: AppStoreServerAPIClient
        let request: NotificationHistoryRequest
        var nextToken: String?
        var finished = false

        public mutating func next() async throws -> NotificationHistoryPage? {
            guard !finished else { return nil }
            let token = nextToken
            let response = try await client.getNotificationHistory(request, paginationToken: token)
            let hasMore = response.hasMore ?? false
            if hasMore {
                guard let next = response.paginationToken, !next.isEmpty else {
                    finished = true
                    throw AppStoreServerAPIError.invalidResponse(
                        .init(
                            endpoint: .getNotificationHistory, httpStatusCode: 200,
                            errorMessage: "hasMore is true but the page has no paginationToken", attempts: 1))
                }
                nextToken = next
            } else {
                finished = true
            }
            return NotificationHistoryPage(response: response)
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(client: client, request: request, nextToken: firstToken)
    }
}

/// One page of notification history.
public struct NotificationHistoryPage: Sendable {
    public var response: NotificationHistoryResponse

    /// Whether another page follows.
    public var hasMore: Bool { response.hasMore ?? false }
    /// The token of the next page, when there is one.
    public var nextPaginationToken: String? { hasMore ? response.paginationToken : nil }
    public var items: [NotificationHistoryResponseItem] { response.notificationHistory ?? [] }
}
