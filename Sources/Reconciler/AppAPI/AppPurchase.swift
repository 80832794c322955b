package import ReconcilerShared

/// One purchase as the app API answers it: the `export` line's fields, with `checkedAt` (UNIX
/// ms, when Apple was last asked about its customer; `null` when never) and `fresh` (`true` only
/// when Apple answered for this request).
package struct AppPurchase: Sendable, Hashable {
    package var state: PurchaseState
    package var checkedAt: Timestamp?
    package var fresh: Bool

    package init(state: PurchaseState, checkedAt: Timestamp?, fresh: Bool) {
        self.state = state
        self.checkedAt = checkedAt
        self.fresh = fresh
    }

    /// The JSON object, its keys sorted as an export line's.
    package func jsonObject() throws -> String {
        var row = try ExportRow(sortedJSONObject: try state.jsonLine())
        row.fields += [("checkedAt", ExportRow.Value(checkedAt?.millisecondsSince1970)), ("fresh", .bool(fresh))]
        row.fields.sort { $0.key < $1.key }
        return try row.jsonLine()
    }
}
