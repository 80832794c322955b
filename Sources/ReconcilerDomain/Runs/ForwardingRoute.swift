/// One webhook an app's notifications are queued for, and which of them (`forwardTo`'s `types`):
/// an app and environment may forward to several, each with its own queue rows.
///
/// ```swift
/// let route = ForwardingRoute(target: ForwardingTarget(url: "https://app.internal/apple"), types: NotificationTypeFilter(["REFUND"]))
/// route.takes(type: "REFUND", subtype: nil)   // true
/// ```
package struct ForwardingRoute: Sendable, Hashable, Codable {
    package var target: ForwardingTarget
    /// The types it takes; `nil`: every one.
    package var types: NotificationTypeFilter?

    package init(target: ForwardingTarget, types: NotificationTypeFilter? = nil) {
        self.target = target
        self.types = types
    }

    /// Whether a notification of `type` and `subtype` is queued for it.
    package func takes(type: String, subtype: String?) -> Bool { types?.matches(type: type, subtype: subtype) ?? true }
}
