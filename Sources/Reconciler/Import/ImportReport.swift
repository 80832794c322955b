package import Foundation

/// What `reconciler import` did: the summary printed at the end and, with `--report-json`, the
/// JSON with exactly these keys (each list capped at ``ImportFileCheck/listLimit`` entries, the
/// counts complete).
package struct ImportReport: Sendable, Codable, Hashable {
    /// An ID Apple knows in no environment tried, with the line that named it.
    package struct NotFound: Sendable, Codable, Hashable {
        package var line: Int
        package var transactionId: String?
        package var orderId: String?
    }

    /// Records after the header, valid or not (blank lines aside).
    package var rowsRead = 0
    /// Customers this import read from Apple (each once, however many rows name it).
    package var customers = 0
    /// The purchases those customers have.
    package var purchases = 0
    /// Purchases the import stored for the first time.
    package var created = 0
    /// Purchases it already had whose state the import changed.
    package var changed = 0
    package var notFound: [NotFound] = []
    package var notFoundCount = 0
    package var invalid: [ImportInvalidRow] = []
    package var invalidCount = 0
    /// Requests made, by Apple's endpoint name.
    package var requests: [String: Int] = [:]
    package var durationSeconds = 0.0

    package init() {}

    /// The report's JSON (`--report-json`).
    package func json() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(self)
    }

    /// Counts an unknown ID; the list keeps the lowest lines (rows finish out of the file's order).
    mutating func add(notFound entry: NotFound) {
        notFoundCount += 1
        notFound.insert(entry, keepingLowest: ImportFileCheck.listLimit) { $0.line }
    }
}

extension Array {
    /// Inserts `element` in the order of `line`, keeping at most `limit` elements: those with the
    /// lowest lines (a report's list of rows that finish out of the file's order).
    mutating func insert(_ element: Element, keepingLowest limit: Int, line: (Element) -> Int) {
        // Rows mostly finish in the file's order: after the last one, without a scan.
        let position = last.map { line($0) <= line(element) } ?? true ? endIndex : (firstIndex { line($0) > line(element) } ?? endIndex)
        guard position < limit else { return }
        insert(element, at: position)
        if count > limit { removeLast() }
    }
}
