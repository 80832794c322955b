package import AppStoreServer
import ReconcilerShared

/// What one notification type means to the reconciler: the one entry to add or change when Apple
/// adds a type or the team changes how one is treated. The handler, the store's write, the replay
/// planner's default order, the deadline of a request and the report's highlights read it.
package struct NotificationRule: Sendable, Hashable {
    /// Whether its transaction and renewal info are applied to the purchase it names (types
    /// without a purchase, as TEST, are stored and reach the feed as notification rows only).
    package var appliesToPurchase: Bool
    /// Whether applying its transaction clears the purchase's revocation (a refund reversed).
    package var clearsRevocation: Bool
    /// How long after Apple first tried to send it the app has to answer, when Apple wants one.
    package var answerWithin: Duration?
    /// The queries a run asks Get Notification History for before its sweep, in this order: `nil`
    /// for the type with any subtype. Empty: the sweep finds it.
    package var typedQueries: [Subtype?]
    /// Whether a missed one leaves a customer with the wrong access at once (a renewal, an
    /// expiry): reports and the incident page highlight it and time its recovery.
    package var isUrgent: Bool

    package init(
        appliesToPurchase: Bool = true, clearsRevocation: Bool = false, answerWithin: Duration? = nil, typedQueries: [Subtype?] = [],
        isUrgent: Bool = false
    ) {
        self.appliesToPurchase = appliesToPurchase
        self.clearsRevocation = clearsRevocation
        self.answerWithin = answerWithin
        self.typedQueries = typedQueries
        self.isUrgent = isUrgent
    }
}

/// Every notification type's ``NotificationRule``, and the order a run queries them in. A type not
/// listed (one Apple adds later: `NotificationTypeV2` is open) gets ``defaultRule``: applied to the
/// purchase it names, found by the sweep.
package enum NotificationRules {
    /// The types a run queries first, most urgent first: consumption requests (Apple wants an answer
    /// within 12 hours of its first send attempt), then renewals and expiries, then refunds,
    /// revokes and billing problems.
    package static let queryOrder: [NotificationTypeV2] = [
        .consumptionRequest, .didRenew, .expired, .refund, .revoke, .gracePeriodExpired, .didFailToRenew,
    ]

    /// The rule of every type whose treatment differs from ``defaultRule``.
    package static let table: [NotificationTypeV2: NotificationRule] = [
        .test: NotificationRule(appliesToPurchase: false),
        .consumptionRequest: NotificationRule(answerWithin: .hours(12), typedQueries: [nil]),
        .didRenew: NotificationRule(typedQueries: [nil, .billingRecovery], isUrgent: true),
        .expired: NotificationRule(typedQueries: [.voluntary, .billingRetry, .priceIncrease, .productNotForSale, nil], isUrgent: true),
        .refund: NotificationRule(typedQueries: [nil]),
        .refundReversed: NotificationRule(clearsRevocation: true),
        .revoke: NotificationRule(typedQueries: [nil]),
        .gracePeriodExpired: NotificationRule(typedQueries: [nil]),
        .didFailToRenew: NotificationRule(typedQueries: [nil, .gracePeriod]),
    ]

    /// The rule of a type the table does not list.
    package static let defaultRule = NotificationRule()

    package static func rule(for type: NotificationTypeV2) -> NotificationRule { table[type] ?? defaultRule }

    /// The typed queries a run makes before its sweep, by default: each type of ``queryOrder``
    /// with its rule's subtypes.
    package static var defaultQueries: [(NotificationTypeV2, Subtype?)] {
        queryOrder.flatMap { type in rule(for: type).typedQueries.map { (type, $0) } }
    }

    /// The urgent types (``NotificationRule/isUrgent``), by name.
    package static var urgentTypeNames: [String] {
        queryOrder.filter { rule(for: $0).isUrgent }.map(\.rawValue)
    }
}
