import ReconcilerDomain
import Testing

@testable import Reconciler

/// The import resolves rows several at once, so they finish out of the file's order: the report's
/// lists still hold the lowest lines, in order, and their counts stay complete.
@Suite struct ImportReportListsTests {
    @Test func notFoundKeepsTheLowestLinesInOrderWhateverOrderRowsFinishIn() {
        var report = ImportReport()
        let limit = ImportFileCheck.listLimit
        // Lines limit + 10 down to 2, then line 1: the list is lines 1 ... limit.
        for line in (2...(limit + 10)).reversed() { report.add(notFound: .init(line: line, transactionId: "\(line)")) }
        report.add(notFound: .init(line: 1, orderId: "ZZZZZZZZZZ"))
        #expect(report.notFoundCount == limit + 10)
        #expect(report.notFound.map(\.line) == Array(1...limit))
        #expect(report.notFound.first == .init(line: 1, orderId: "ZZZZZZZZZZ"))
    }

    @Test func failuresKeepTheLowestLinesInOrderAndCountEveryOne() {
        var result = CustomerImport.Result(report: ImportReport(), runIds: [1])
        let limit = ImportFileCheck.listLimit
        for line in [5, 3] + Array((10...(limit + 20)).reversed()) + [4] {
            result.record(.failed(line % 2 == 0 ? .permanent : .retryable, "Apple failed"), of: ImportRow(line: line, transactionId: "\(line)"))
        }
        #expect(result.retryableFailures + result.permanentFailures == limit + 14)
        #expect(result.failures.count == limit)
        #expect(result.failures.map(\.line) == [3, 4, 5] + Array(10..<(limit + 7)))
        #expect(result.ending?.exitCode == 2)
    }
}
