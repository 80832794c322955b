import AppStoreServer

/// What the handler did with one notification.
package struct HandlingResult: Sendable {
    package enum Outcome: String, Sendable, Codable, CaseIterable {
        /// Recorded, and its data applied: its purchase changed (as the change feed counts a change,
        /// `entitled` and `lastSignedDate` aside; the feed's row names the newest notification of
        /// the batch).
        case applied
        /// Recorded, but signed before the newest notification its purchase already reflected.
        /// Its data goes through the same guards as any other: each part of the purchase (its
        /// transactions, renewal info, status) moves only to data signed later than what is stored,
        /// so a stale notification can still add what is new in it (a transaction version not seen
        /// before), and never takes anything back.
        case stale
        /// Recorded only: it carries nothing to apply (TEST, summaries, external purchase tokens),
        /// or what it carried was stored already, so its purchase did not change.
        case recorded
        /// Already recorded under its notificationUUID: nothing done.
        case duplicate
    }

    package var notificationUUID: String
    package var typeAndSubtype: String
    package var originalTransactionId: String?
    package var outcome: Outcome
    /// The purchase before and after, when the notification was about one and was not a duplicate.
    package var change: PurchaseChange?

    package init(
        notificationUUID: String, typeAndSubtype: String, originalTransactionId: String? = nil, outcome: Outcome, change: PurchaseChange? = nil
    ) {
        self.notificationUUID = notificationUUID
        self.typeAndSubtype = typeAndSubtype
        self.originalTransactionId = originalTransactionId
        self.outcome = outcome
        self.change = change
    }
}
