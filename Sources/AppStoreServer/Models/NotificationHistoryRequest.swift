/// The request body of Get Notification History.
///
/// Send the same body on every page; only the `paginationToken` query parameter changes.
/// Set either ``transactionId`` or ``notificationType`` (optionally with ``notificationSubtype``), not both.
///
/// ```swift
/// let request = NotificationHistoryRequest(startDate: start, endDate: end, notificationType: .didRenew)
/// ```
public struct NotificationHistoryRequest: Codable, Hashable, Sendable {
    /// The start of the timespan, UNIX milliseconds; within the last 180 days (30 in the sandbox).
    public var startDate: Int64
    /// The end of the timespan, UNIX milliseconds; later than ``startDate``.
    public var endDate: Int64
    public var notificationType: NotificationTypeV2?
    /// Requires ``notificationType``. Without it, Apple returns only notifications without a subtype.
    public var notificationSubtype: Subtype?
    public var transactionId: String?
    /// `true` returns only notifications that did not reach your server (including those Apple still retries).
    public var onlyFailures: Bool?

    public init(
        startDate: Int64, endDate: Int64, notificationType: NotificationTypeV2? = nil,
        notificationSubtype: Subtype? = nil, transactionId: String? = nil, onlyFailures: Bool? = nil
    ) {
        self.startDate = startDate
        self.endDate = endDate
        self.notificationType = notificationType
        self.notificationSubtype = notificationSubtype
        self.transactionId = transactionId
        self.onlyFailures = onlyFailures
    }
}
