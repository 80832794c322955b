/// One customer named by a row of an import file, valid by `repair`'s rules.
package struct ImportRow: Sendable, Hashable {
    /// The 1-based physical line where the record starts (a CSV file's header is line 1).
    package var line: Int
    /// Any transaction ID Get Transaction History accepts (original, a renewal's, a consumable's,
    /// an `appTransactionId`).
    package var transactionId: String?
    /// The order ID on the customer's receipt email; asked of Apple only when the row has no
    /// transaction ID, or Apple does not know it.
    package var orderId: String?
    /// The app's own ID for the customer (at most 255 Unicode scalars).
    package var appUserId: String?

    package init(line: Int, transactionId: String? = nil, orderId: String? = nil, appUserId: String? = nil) {
        self.line = line
        self.transactionId = transactionId
        self.orderId = orderId
        self.appUserId = appUserId
    }
}

/// A row of an import file that names no customer by `repair`'s rules, and why.
package struct ImportInvalidRow: Sendable, Hashable, Codable {
    package var line: Int
    package var reason: String

    package init(line: Int, reason: String) {
        self.line = line
        self.reason = reason
    }
}

/// What the reader gives for each record of an import file.
package enum ImportRecord: Sendable, Hashable {
    case row(ImportRow)
    case invalid(ImportInvalidRow)
}

/// The two forms of an import file.
package enum ImportFormat: String, Sendable, CaseIterable {
    /// RFC 4180, with a header row.
    case csv
    /// One JSON object a line.
    case jsonl

    /// The form a file's name says: `.jsonl` is JSONL, anything else CSV.
    package init(path: String) {
        self = path.lowercased().hasSuffix(".jsonl") ? .jsonl : .csv
    }
}
