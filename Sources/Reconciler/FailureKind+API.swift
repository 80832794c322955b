import AppStoreServer
import ReconcilerDomain

extension AppStoreServerAPIError {
    /// Whether the next run should retry the shard or customer this error failed: Apple refusing
    /// the request (4xx, and 5000000 GeneralInternalError, which Apple does not list among the
    /// errors to retry) will not change by itself; throttling, other 5xx and the network may.
    var failureKind: FailureKind {
        switch self {
        case .badRequest, .notFound, .unexpectedStatus: .permanent
        case .serverError(let details) where details.errorCode == .generalInternal: .permanent
        default: .retryable
        }
    }
}

extension APIStatistics.Snapshot {
    /// What was counted after `start`: one run's share of a process's counters.
    func since(_ start: APIStatistics.Snapshot) -> APIStatistics.Snapshot {
        APIStatistics.Snapshot(
            requests: requests - start.requests, retries: retries - start.retries, rateLimited: rateLimited - start.rateLimited,
            serverErrors: serverErrors - start.serverErrors, transportErrors: transportErrors - start.transportErrors,
            failedCalls: failedCalls - start.failedCalls)
    }
}
