import AppStoreServer
import Foundation
import ReconcilerDomain
import Testing

@testable import Reconciler

/// `reconciler import`'s file: RFC 4180 CSV (BOM, LF or CRLF, quoted fields with commas, line
/// breaks and doubled quotes, a header of exact names in any order) and JSONL, each record with the
/// physical line it starts on, blank lines skipped and counted, IDs valid by `repair`'s rules.
@Suite struct ImportFileReaderTests {
    /// Every record of `text`, read `chunkSize` bytes at a time (records cut across chunks).
    func records(_ text: String, format: ImportFormat = .csv, chunkSize: Int = 7) throws -> (records: [ImportRecord], blank: Int) {
        var reader = ImportFileReader(format: format, source: .bytes(Array(text.utf8), chunkSize: chunkSize))
        var records: [ImportRecord] = []
        while let record = try reader.next() { records.append(record) }
        return (records, reader.blankLines)
    }

    func headerError(_ text: String) -> String? {
        do {
            _ = try records(text)
            return nil
        } catch let error as ReconcilerError {
            #expect(error.code == .invalidInput)
            return error.description
        } catch {
            return "\(error)"
        }
    }

    @Test func columnsInAnyOrderWithABOMAndCRLFGiveRowsWithTheLineTheyStartOn() throws {
        let text = "\u{FEFF}appUserId,orderId,transactionId\r\nuser-1,,2000000000000001\r\n\r\n,MQ5Q7X2ZYB,\r\nuser-3,MQ5Q7X2ZYC,2000000000000003"
        for chunkSize in [1, 3, 64] {
            let (records, blank) = try records(text, chunkSize: chunkSize)
            #expect(
                records == [
                    .row(.init(line: 2, transactionId: "2000000000000001", appUserId: "user-1")),
                    .row(.init(line: 4, orderId: "MQ5Q7X2ZYB")),
                    .row(.init(line: 5, transactionId: "2000000000000003", orderId: "MQ5Q7X2ZYC", appUserId: "user-3")),
                ], "chunk \(chunkSize)")
            #expect(blank == 1)
        }
    }

    @Test func quotedFieldsHoldCommasLineBreaksAndDoubledQuotesAndTheNextRecordKeepsItsPhysicalLine() throws {
        let text = """
            transactionId,appUserId
            2000000000000001,"Smith, Jane"
            2000000000000002,"two
            lines \"\"quoted\"\"\"
            "2000000000000003",plain
            """
        let (records, blank) = try records(text)
        #expect(
            records == [
                .row(.init(line: 2, transactionId: "2000000000000001", appUserId: "Smith, Jane")),
                .row(.init(line: 3, transactionId: "2000000000000002", appUserId: "two\nlines \"quoted\"")),
                .row(.init(line: 5, transactionId: "2000000000000003", appUserId: "plain")),
            ])
        #expect(blank == 0)
    }

    @Test func badRowsAreInvalidWithTheirLineAndReasonAndReadingGoesOn() throws {
        let long = String(repeating: "é", count: 256)
        let text = """
            transactionId,orderId,appUserId
            abc,,
            ,,someone
            ,MQ-5Q7,
            2000000000000001,,\(long)
            2000000000000002,x"y,
            "2000000000000003"z,,
            2000000000000004,,,
            2000000000000005,,ok
            """
        let (records, _) = try records(text)
        let invalid = records.compactMap { record -> ImportInvalidRow? in
            if case .invalid(let row) = record { return row }
            return nil
        }
        #expect(invalid.map(\.line) == [2, 3, 4, 5, 6, 7, 8])
        #expect(invalid[0].reason.contains("transactionId \"abc\" is not a transaction ID"))
        #expect(invalid[1].reason == "neither a transactionId nor an orderId")
        #expect(invalid[2].reason.contains("orderId \"MQ-5Q7\" is not an order ID"))
        #expect(invalid[3].reason.contains("256 Unicode scalars"))
        #expect(invalid[4].reason.contains("a quote inside a field"))
        #expect(invalid[5].reason.contains("after the closing quote"))
        #expect(invalid[6].reason.contains("4 fields where the header has 3"))
        #expect(records.last == .row(.init(line: 9, transactionId: "2000000000000005", appUserId: "ok")))
    }

    @Test func anAppUserIdOf255ScalarsIsKept() throws {
        let user = String(repeating: "é", count: 255)
        #expect(try records("transactionId,appUserId\n1,\(user)\n").records == [.row(.init(line: 2, transactionId: "1", appUserId: user))])
    }

    @Test func aQuoteLeftOpenIsAnInvalidRowAtTheLineItStarts() throws {
        let (records, _) = try records("transactionId,appUserId\n1,a\n2,\"open\n3,b\n")
        #expect(records.count == 2)
        #expect(records[1] == .invalid(.init(line: 3, reason: "a quoted field is not closed before the end of the file")))
    }

    @Test func aHeaderItCannotUseStopsTheFileNamingTheColumn() {
        #expect(headerError("transactionId,userId\n1,a\n")?.contains("line 1 (the header): unknown column \"userId\"") == true)
        #expect(headerError("TransactionId\n1\n")?.contains("unknown column \"TransactionId\"") == true)
        #expect(headerError("transactionId,transactionId\n1,1\n")?.contains("appears twice") == true)
        #expect(headerError("appUserId\nx\n")?.contains("needs a transactionId or an orderId column") == true)
        #expect(headerError("")?.contains("empty") == true)
        #expect(headerError("\n\n")?.contains("empty") == true)
    }

    @Test func jsonlObjectsAreRowsByTheirPhysicalLine() throws {
        let text = """
            {"transactionId": "2000000000000001", "appUserId": "user-1"}

            {"orderId": "MQ5Q7X2ZYB", "appUserId": null}\r
            {"transactionId": 2000000000000003}
            {"transactionId": "1", "userId": "x"}
            {"transactionId": true}
            not json
            {"orderId": "MQ5Q7X2ZYC"}
            """
        let (records, blank) = try records(text, format: .jsonl)
        #expect(blank == 1)
        #expect(
            records == [
                .row(.init(line: 1, transactionId: "2000000000000001", appUserId: "user-1")),
                .row(.init(line: 3, orderId: "MQ5Q7X2ZYB")),
                .row(.init(line: 4, transactionId: "2000000000000003")),
                .invalid(.init(line: 5, reason: "unknown key \"userId\"; the keys are transactionId, orderId and appUserId")),
                .invalid(.init(line: 6, reason: "transactionId must be a string")),
                .invalid(.init(line: 7, reason: "not a JSON object on one line")),
                .row(.init(line: 8, orderId: "MQ5Q7X2ZYC")),
            ])
    }

    @Test func theFormatComesFromTheFileName() {
        #expect(ImportFormat(path: "customers.jsonl") == .jsonl)
        #expect(ImportFormat(path: "customers.JSONL") == .jsonl)
        #expect(ImportFormat(path: "customers.csv") == .csv)
        #expect(ImportFormat(path: "customers") == .csv)
    }

    @Test func theCheckCountsRowsDistinctIdsAndInvalidRowsAndEstimatesAtTheBudget() throws {
        let text = """
            transactionId,orderId
            2000000000000001,
            2000000000000001,
            2000000000000002,MQ5Q7X2ZYB
            ,MQ5Q7X2ZYC
            ,MQ5Q7X2ZYC

            bad,
            """
        var reader = ImportFileReader(format: .csv, source: .bytes(Array(text.utf8)))
        let check = try ImportFileCheck.scan(&reader)
        #expect(check.rowsRead == 6)
        #expect(check.validRows == 5)
        #expect(check.invalidCount == 1)
        #expect(check.invalid == [.init(line: 8, reason: "transactionId \"bad\" is not a transaction ID (digits, e.g. 2000000123456789)")])
        #expect(check.blankLines == 1)
        #expect(check.distinctTransactionIds == 2)
        #expect(check.distinctOrderIds == 1)
        let estimate = check.estimate(budget: [.getTransactionHistory: 40, .getAllSubscriptionStatuses: 40, .lookUpOrderId: 0.5])
        #expect(estimate.requests == ["Look Up Order ID": 1, "Get Transaction History": 3, "Get All Subscription Statuses": 3])
        #expect(estimate.seconds == 2)
    }

    @Test func aLongRecordIsInvalidWithoutBeingKept() throws {
        let long = String(repeating: "1", count: ImportFileReader.longestRecord + 10)
        let (records, _) = try records("transactionId\n\(long)\n2\n", chunkSize: 4096)
        #expect(records.count == 2)
        #expect(records[0] == .invalid(.init(line: 2, reason: "the record is longer than \(ImportFileReader.longestRecord) bytes")))
        #expect(records[1] == .row(.init(line: 3, transactionId: "2")))
    }
}

/// `import --report-json`: exactly the keys, lists capped at 1,000 with complete counts.
@Suite struct ImportReportTests {
    @Test func theReportHasExactlyItsKeysAndCapsItsListsButNotItsCounts() throws {
        var report = ImportReport()
        for line in 2...1_502 { report.add(notFound: .init(line: line, transactionId: "\(line)")) }
        report.add(notFound: .init(line: 1_600, orderId: "MQ5Q7X2ZYB"))
        report.requests = ["Get Transaction History": 3]
        let object = try #require(try JSONSerialization.jsonObject(with: report.json()) as? [String: Any])
        #expect(
            Set(object.keys) == [
                "rowsRead", "customers", "purchases", "created", "changed", "notFound", "notFoundCount", "invalid", "invalidCount", "requests",
                "durationSeconds",
            ])
        let notFound = try #require(object["notFound"] as? [[String: Any]])
        #expect(notFound.count == ImportFileCheck.listLimit)
        #expect(object["notFoundCount"] as? Int == 1_502)
        #expect(notFound[0].keys.sorted() == ["line", "transactionId"])
    }
}
