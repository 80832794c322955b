/// The request body for notification history.
///
/// [NotificationHistoryRequest](https://developer.apple.com/documentation/appstoreserverapi/notificationhistoryrequest)
///
/// It is the body of Get Notification History. Send the same body on every page; only the
/// `paginationToken` query parameter changes.
/// Set either ``transactionId`` or ``notificationType`` (optionally with ``notificationSubtype``), not both.
///
/// ```swift
/// let request = NotificationHistoryRequest(startDate: start, endDate: end, notificationType: .didRenew)
/// ```
public struct NotificationHistoryRequest: Codable, Hashable, Sendable {
    /// The start date of the timespan for the requested notification history records, in UNIX milliseconds.
    ///
    /// [startDate](https://developer.apple.com/documentation/appstoreserverapi/startdate)
    ///
    /// It must precede ``endDate`` and lie within the past 180 days (30 in the sandbox).
    public var startDate: Int64

    /// The end date of the timespan for the requested notification history records, in UNIX milliseconds.
    ///
    /// [endDate](https://developer.apple.com/documentation/appstoreserverapi/enddate)
    ///
    /// It must be later than ``startDate``; Apple uses the current date for a date in the future.
    public var endDate: Int64

    /// A notification type that limits the records to notifications of this one type.
    ///
    /// [notificationType](https://developer.apple.com/documentation/appstoreserverapi/notificationtype)
    public var notificationType: NotificationTypeV2?

    /// A notification subtype that limits the records to notifications of this one subtype; it requires ``notificationType``.
    ///
    /// [notificationSubtype](https://developer.apple.com/documentation/appstoreserverapi/notificationsubtype)
    ///
    /// Without a subtype, Apple returns only notifications without a subtype.
    public var notificationSubtype: Subtype?

    /// The identifier of any transaction of the customer, which limits the records to this one customer.
    ///
    /// [transactionId](https://developer.apple.com/documentation/appstoreserverapi/transactionid)
    public var transactionId: String?

    /// A Boolean value you set to true to request only the notifications that haven't reached your server successfully.
    ///
    /// [onlyFailures](https://developer.apple.com/documentation/appstoreserverapi/onlyfailures)
    ///
    /// The response also includes the notifications that the App Store server is still retrying.
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
