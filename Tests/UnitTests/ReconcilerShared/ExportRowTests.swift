import ReconcilerShared
import Testing

/// An export line as JSON and as an RFC 4180 CSV record: keys in order, null empty, Booleans
/// `true`/`false`, fields with a comma, a quote or a line break quoted with their quotes doubled.
@Suite struct ExportRowTests {
    @Test func aRowIsOneJSONObjectAndOneCSVRecordWithItsKeysInOrder() throws {
        let row = ExportRow([
            ("transactionId", .string("2000000100000212")), ("price", .integer(9990)), ("revocationDate", .null), ("entitled", .bool(true)),
            ("offerIdentifier", .string("spring, \"50%\"\r\noff")),
        ])
        #expect(
            try row.jsonLine()
                == #"{"transactionId":"2000000100000212","price":9990,"revocationDate":null,"entitled":true,"offerIdentifier":"spring, \"50%\"\r\noff"}"#
        )
        #expect(row.csvHeader == "transactionId,price,revocationDate,entitled,offerIdentifier\r\n")
        #expect(row.csvRecord == "2000000100000212,9990,,true,\"spring, \"\"50%\"\"\r\noff\"\r\n")
        // A purchase line (keys sorted) reads into the same row shape.
        let purchase = try ExportRow(sortedJSONObject: #"{"b":null,"a":false,"c":3}"#)
        #expect(purchase.fields.map(\.key) == ["a", "b", "c"] && purchase.csvRecord == "false,,3\r\n")
    }
}
