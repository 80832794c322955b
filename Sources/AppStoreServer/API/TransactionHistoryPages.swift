/// The pages of one Get Transaction History (v2) query, fetched one at a time as consumed.
///
/// Each request after the first carries the previous page's `revision` with the same filters.
/// The last page's ``HistoryResponse/revision`` is the one to store for next time.
public struct TransactionHistoryPages: AsyncSequence, Sendable {
    public typealias Element = HistoryResponse

    let client: AppStoreServerAPIClient
    let anyTransactionId: String
    let request: TransactionHistoryRequest

    public struct AsyncIterator: AsyncIteratorProtocol {
        let client: AppStoreServerAPIClient
        let anyTransactionId: String
        var request: TransactionHistoryRequest
        var finished = false

        public mutating func next() async throws -> HistoryResponse? {
            guard !finished else { return nil }
            let response = try await client.getTransactionHistory(anyTransactionId: anyTransactionId, request)
            guard response.hasMore ?? false else {
                finished = true
                return response
            }
            guard let revision = response.revision, !revision.isEmpty else {
                finished = true
                throw AppStoreServerAPIError.invalidResponse(
                    .init(
                        endpoint: .getTransactionHistory, httpStatusCode: 200,
                        errorMessage: "hasMore is true but the page has no revision", attempts: 1))
            }
            request.revision = revision
            return response
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(client: client, anyTransactionId: anyTransactionId, request: request)
    }
}
