/// Whether a failure is worth retrying: the next run retries `retryable` ones; `permanent` ones
/// (Apple refused the request) need a person and do not hold the schedule back.
package enum FailureKind: String, Sendable, Codable {
    case retryable
    case permanent
}
