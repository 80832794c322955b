package import AppStoreServer
import Foundation
package import ReconcilerDomain

/// What an import file holds, read to its end before anything is asked of Apple: the rows, the
/// invalid ones (listed up to ``listLimit``, counted in full), blank lines, and the distinct IDs
/// an import would read. `import --dry-run` prints it with ``Estimate``; an import with invalid
/// rows stops on it unless `--skip-invalid`.
package struct ImportFileCheck: Sendable, Codable {
    /// How many entries a list of a report holds; the counts beside it are complete.
    package static let listLimit = 1_000

    /// Records after the header (valid or not), blank lines aside.
    package var rowsRead = 0
    package var validRows = 0
    package var blankLines = 0
    package var invalid: [ImportInvalidRow] = []
    package var invalidCount = 0
    /// Distinct transaction IDs among the valid rows.
    package var distinctTransactionIds = 0
    /// Distinct order IDs of the valid rows that give no transaction ID (each is a Look Up Order ID).
    package var distinctOrderIds = 0

    package init() {}

    /// Reads the file to its end. With `countingDistinct` (the dry run) the distinct IDs are
    /// counted by a 64-bit digest each (8 bytes an ID, not the IDs themselves: a few megabytes for
    /// a million rows); without it (the import, which counts customers as it reads them) the
    /// check's memory does not grow with the file at all.
    package static func scan(_ reader: inout ImportFileReader, countingDistinct: Bool = true) throws -> ImportFileCheck {
        var check = ImportFileCheck()
        var transactionIds = Set<UInt64>()
        var orderIds = Set<UInt64>()
        while let record = try reader.next() {
            check.rowsRead += 1
            switch record {
            case .row(let row):
                check.validRows += 1
                guard countingDistinct else { continue }
                if let id = row.transactionId {
                    transactionIds.insert(digest(id))
                } else if let id = row.orderId {
                    orderIds.insert(digest(id))
                }
            case .invalid(let row):
                check.invalidCount += 1
                if check.invalid.count < listLimit { check.invalid.append(row) }
            }
        }
        check.blankLines = reader.blankLines
        check.distinctTransactionIds = transactionIds.count
        check.distinctOrderIds = orderIds.count
        return check
    }

    /// FNV-1a, 64 bits: stable across runs, unlike `Hasher`.
    private static func digest(_ id: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in id.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01b3
        }
        return hash
    }

    /// The requests an import of the file makes at the least (one page of transaction history and
    /// one status request a customer, one Look Up Order ID an order ID), and the time they take
    /// at the budget at most: the slowest endpoint's requests over its budget. A customer with more
    /// than 20 transactions takes another page of history for each 20 more.
    package struct Estimate: Sendable, Codable {
        /// Requests by Apple's endpoint name.
        package var requests: [String: Int]
        package var seconds: Double
    }

    package func estimate(budget: [AppStoreServerAPIEndpoint: Double]) -> Estimate {
        let customers = distinctTransactionIds + distinctOrderIds
        let needed: [(AppStoreServerAPIEndpoint, Int)] = [
            (.lookUpOrderId, distinctOrderIds), (.getTransactionHistory, customers), (.getAllSubscriptionStatuses, customers),
        ]
        let seconds =
            needed.map { endpoint, count in
                count == 0 ? 0 : Double(count) / max(budget[endpoint] ?? 1, 0.001)
            }.max() ?? 0
        return Estimate(
            requests: Dictionary(needed.filter { $0.1 > 0 }.map { ($0.0.name, $0.1) }, uniquingKeysWith: +), seconds: seconds)
    }
}
