import Foundation
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

    /// The JSON object, its keys sorted as an export line's: one encoding of the export line's
    /// fields with these two (the read path answers it for every purchase of every read).
    package func jsonObject() throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(Object(purchase: self)), as: UTF8.self)
    }

    /// The export line's keyed fields and `checkedAt` and `fresh`, in one object.
    private struct Object: Encodable {
        var purchase: AppPurchase

        enum CodingKeys: String, CodingKey {
            case checkedAt, fresh
        }

        func encode(to encoder: any Encoder) throws {
            try purchase.state.encode(to: encoder)
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(purchase.checkedAt?.millisecondsSince1970, forKey: .checkedAt)
            try container.encode(purchase.fresh, forKey: .fresh)
        }
    }
}
