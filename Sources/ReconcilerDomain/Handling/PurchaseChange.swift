package import ReconcilerShared

/// The state of a purchase before and after applying something to it.
package struct PurchaseChange: Sendable, Hashable, Codable {
    package var before: PurchaseState?
    package var after: PurchaseState

    package init(before: PurchaseState?, after: PurchaseState) {
        self.before = before
        self.after = after
    }

    /// Whether what `export` shows changed.
    package var isChange: Bool { before != after }

    /// Whether something stored changed, not only `entitled`: that one moves with the clock (the
    /// before and after states are judged moments apart), and the feed records changes of the data.
    package var changesStoredFacts: Bool {
        guard var before else { return true }
        before.entitled = after.entitled
        return before != after
    }

    /// Whether the purchase changed, `entitled` and `lastSignedDate` aside: what writes a purchase
    /// row in the change feed. `lastSignedDate` moves with every notification about the purchase; a
    /// notification that moves nothing else changed no purchase, and the feed gets a row of kind
    /// `notification` for it instead.
    package var changesPurchase: Bool {
        guard var before else { return true }
        before.entitled = after.entitled
        before.lastSignedDate = after.lastSignedDate
        return before != after
    }
}
