import Foundation
import MockAppStore
import NIOHTTP1
import PostgresNIO
import TestSupport
import Testing

/// `reconciler import` as an operator runs it, against `mock-appstore` over HTTP: a file it
/// cannot use asks nothing of Apple and exits 1; a good one exits 0 with unknown IDs listed by
/// line in `--report-json`, and the same file again makes no request.
@Suite struct ImportCommandTests {
    @Test func aBadFileAsksNothingAndAnImportedFileAsksNothingTheSecondTime() async throws {
        try await HistoryMock.with(["--customers", "8", "--seed", "43"]) { mock in
            let directory = try TemporaryDirectory.create("import")
            defer { directory.remove() }
            func total() async throws -> Int { try await mock.requests().values.reduce(0, +) }

            let badHeader = directory.file("bad.csv")
            try "transactionId,userId\n2000000000000001,x\n".write(toFile: badHeader, atomically: true, encoding: .utf8)
            let refused = try await mock.reconciler(["import", badHeader])
            #expect(refused.status == 1, "\(refused.stdout)\n\(refused.stderr)")
            #expect(refused.stderr.contains("line 1 (the header): unknown column \"userId\""), "\(refused.stderr)")

            let invalidRow = directory.file("invalid.csv")
            try "transactionId\n2000000000000001\n20000000000000x2\n".write(toFile: invalidRow, atomically: true, encoding: .utf8)
            let invalid = try await mock.reconciler(["import", invalidRow])
            #expect(invalid.status == 1)
            #expect(invalid.stderr.contains("line 3: transactionId \"20000000000000x2\""), "\(invalid.stderr)")
            #expect(try await total() == 0, "a file with a bad header or an invalid row asked Apple")

            let body = try await HTTP.request(.GET, "\(mock.url)/mock/orders").body
            let orders = try String(decoding: body, as: UTF8.self).split(separator: "\n").map {
                try JSONDecoder().decode(MockOrder.self, from: Data($0.utf8))
            }
            let originals = Array(Set(orders.map(\.originalTransactionId))).sorted()
            let file = directory.file("customers.csv")
            try ("transactionId\n" + originals.joined(separator: "\n") + "\n9999999999999991\n").write(
                toFile: file, atomically: true, encoding: .utf8)
            let reportPath = directory.file("report.json")
            let first = try await mock.reconciler(["import", file, "--report-json", reportPath])
            #expect(first.status == 0, "\(first.stdout)\n\(first.stderr)")
            let report = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: reportPath))) as? [String: Any])
            #expect(
                Set(report.keys) == [
                    "rowsRead", "customers", "purchases", "created", "changed", "notFound", "notFoundCount", "invalid", "invalidCount", "requests",
                    "durationSeconds",
                ])
            #expect(report["rowsRead"] as? Int == originals.count + 1)
            let notFound = try #require(report["notFound"] as? [[String: Any]])
            #expect(notFound.count == 1)
            #expect(notFound.first?["line"] as? Int == originals.count + 2)
            #expect(notFound.first?["transactionId"] as? String == "9999999999999991")
            #expect(try await mock.db.count("SELECT count(*) FROM purchases") >= originals.count)

            let asked = try await total()
            let second = try await mock.reconciler(["import", file])
            #expect(second.status == 0, "\(second.stdout)\n\(second.stderr)")
            #expect(try await total() == asked, "the second import of the file asked Apple")
        }
    }
}
