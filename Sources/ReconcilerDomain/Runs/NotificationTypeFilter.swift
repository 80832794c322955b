/// Which notifications a forwarding target takes (`forwardTo`'s `types`) or a redelivery
/// re-queues (`forward --redeliver --type`), by type as the run report prints them: `TYPE`
/// matches every subtype of it, `TYPE/SUBTYPE` that subtype only.
///
/// ```swift
/// let filter = NotificationTypeFilter(["SUBSCRIBED", "DID_CHANGE_RENEWAL_STATUS/AUTO_RENEW_DISABLED"])
/// filter.matches(type: "SUBSCRIBED", subtype: "RESUBSCRIBE")   // true
/// filter.matches(type: "DID_CHANGE_RENEWAL_STATUS", subtype: "AUTO_RENEW_ENABLED")   // false
/// ```
package struct NotificationTypeFilter: Sendable, Hashable, Codable {
    /// As given; empty: every notification.
    package let written: [String]

    package init(_ written: [String]) {
        self.written = written
    }

    package init(from decoder: any Decoder) throws {
        written = try decoder.singleValueContainer().decode([String].self)
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(written)
    }

    package func matches(type: String, subtype: String?) -> Bool {
        written.isEmpty
            || written.contains { entry in
                let parts = entry.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
                guard parts.first == type else { return false }
                return parts.count == 1 || parts[1] == subtype
            }
    }

    /// The first entry that is not `TYPE` or `TYPE/SUBTYPE` in Apple's spelling (capitals, digits
    /// and underscores, as the run report prints them); `nil` when every one is.
    package static func malformed(_ written: [String]) -> String? {
        let name = { (part: Substring) in !part.isEmpty && part.allSatisfy { ("A"..."Z").contains($0) || ("0"..."9").contains($0) || $0 == "_" } }
        return written.first { entry in
            let parts = entry.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
            return !parts.allSatisfy(name)
        }
    }
}
