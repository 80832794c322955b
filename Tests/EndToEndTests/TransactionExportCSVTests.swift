import Foundation
import PostgresNIO
import TestSupport
import Testing

/// `reconciler export --transactions --format csv` and `export --format csv` as a finance load
/// reads them: Python's `csv` module reads the files back, the header is the JSON keys in order,
/// and price, currency and storefront are the stored ones (which the integration test holds equal
/// to what the mock signed).
@Suite struct TransactionExportCSVTests {
    @Test func theCSVExportsReadBackWithPythonsCSVModule() async throws {
        try await HistoryMock.with(["--seed", "374", "--customers", "10", "--span", "2d", "--rate-limit", "0"]) { mock in
            let run = try await mock.reconciler(["run", "--start", "now-47h", "--end", "now"], environment: ["APP_STORE_RATE_LIMIT": "1000"])
            #expect(run.status == 0, "\(run.stdout)\n\(run.stderr)")
            let script =
                "import csv, json, sys; reader = csv.DictReader(sys.stdin, strict=True); rows = list(reader); "
                + "print(json.dumps({'keys': reader.fieldnames, 'rows': rows}))"
            func readBack(_ arguments: [String]) async throws -> (keys: [String], rows: [[String: String]], json: [String]) {
                let csv = try await mock.reconciler(["export", "--format", "csv"] + arguments)
                #expect(csv.status == 0, "\(csv.stderr)")
                #expect(csv.stdout.hasSuffix("\r\n"))
                let read = try await runProcess("/usr/bin/python3", ["-c", script], stdin: Data(csv.stdout.utf8))
                #expect(read.status == 0, "\(read.stderr)")
                let parsed = try #require(try JSONSerialization.jsonObject(with: Data(read.stdout.utf8)) as? [String: Any])
                let json = try await mock.reconciler(["export"] + arguments)
                return (
                    parsed["keys"] as? [String] ?? [], parsed["rows"] as? [[String: String]] ?? [],
                    json.stdout.split(separator: "\n").map(String.init)
                )
            }
            let transactions = try await readBack(["--transactions"])
            #expect(
                transactions.keys == [
                    "transactionId", "originalTransactionId", "productId", "type", "purchaseDate", "expiresDate", "revocationDate", "price",
                    "currency", "storefront", "offerType", "offerIdentifier", "revocationType", "revocationPercentage", "billingPlanType",
                    "billingPeriodNumber", "commitmentExpiresDate", "commitmentPrice", "totalBillingPeriods", "bundleId", "environment",
                    "appUserId", "updatedAt",
                ])
            #expect(transactions.rows.count == transactions.json.count && transactions.rows.count > 10)
            let stored = try await mock.db.strings(
                "SELECT transaction_id || ' ' || coalesce(price::text, '') || ' ' || coalesce(currency, '') || ' ' || coalesce(storefront, '') FROM transactions"
            )
            #expect(
                Set(transactions.rows.map { "\($0["transactionId"]!) \($0["price"]!) \($0["currency"]!) \($0["storefront"]!)" }) == Set(stored))
            // The JSON lines say the same, keys in the same order; null is an empty field.
            for (record, line) in zip(transactions.rows, transactions.json) {
                let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
                #expect(object["transactionId"] as? String == record["transactionId"])
                #expect(object["appUserId"] is NSNull && record["appUserId"] == "")
                #expect((object["price"] as? Int).map(String.init) ?? "" == record["price"])
            }
            #expect(transactions.json.first?.hasPrefix("{\"transactionId\":") == true)

            let purchases = try await readBack([])
            #expect(purchases.keys == purchases.keys.sorted() && purchases.keys.contains("entitled"))
            #expect(purchases.rows.count == purchases.json.count && purchases.rows.allSatisfy { ["true", "false", ""].contains($0["entitled"]) })
        }
    }
}
