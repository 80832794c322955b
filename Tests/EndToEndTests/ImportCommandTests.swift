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

    /// The appUserId an import gives on the command line: `export --app-user-id`, `changes
    /// --app-user-id` and `repair --app-user-id` select that user's purchases; a user no import
    /// named is exit 1 for repair, naming the other selectors, and asks Apple nothing.
    @Test func appUserIdSelectsInExportChangesAndRepair() async throws {
        try await HistoryMock.with(["--customers", "6", "--seed", "44"]) { mock in
            let directory = try TemporaryDirectory.create("import-users")
            defer { directory.remove() }
            let body = try await HTTP.request(.GET, "\(mock.url)/mock/orders").body
            let orders = try String(decoding: body, as: UTF8.self).split(separator: "\n").map {
                try JSONDecoder().decode(MockOrder.self, from: Data($0.utf8))
            }
            let byAccount = Dictionary(grouping: orders, by: \.account)
            let accounts = byAccount.keys.sorted()
            let (alice, bob) = (accounts[0], accounts[1])
            let file = directory.file("users.csv")
            try "transactionId,appUserId\n\(byAccount[alice]![0].originalTransactionId),alice\n\(byAccount[bob]![0].originalTransactionId),bob\n"
                .write(toFile: file, atomically: true, encoding: .utf8)
            let imported = try await mock.reconciler(["import", file])
            #expect(imported.status == 0, "\(imported.stdout)\n\(imported.stderr)")
            let alicePurchases = Set(byAccount[alice]!.map(\.originalTransactionId))

            let exported = try await mock.reconciler(["export", "--app-user-id", "alice"])
            #expect(exported.status == 0, "\(exported.stderr)")
            let states = try exported.stdout.split(separator: "\n").map { try JSONDecoder().decode([String: ExportValue].self, from: Data($0.utf8)) }
            #expect(Set(states.compactMap { $0["originalTransactionId"]?.text }) == alicePurchases)
            #expect(states.allSatisfy { $0["appUserId"]?.text == "alice" })

            // Every kept state of alice's purchases (the first line says what pruning removed).
            let history = try await mock.reconciler(["export", "--history", "--app-user-id", "alice"])
            #expect(history.status == 0, "\(history.stderr)")
            let historyRows = try history.stdout.split(separator: "\n").dropFirst().map {
                try JSONDecoder().decode([String: ExportValue].self, from: Data($0.utf8))
            }
            #expect(Set(historyRows.compactMap { $0["originalTransactionId"]?.text }) == alicePurchases)

            let changes = try await mock.reconciler(["changes", "--since", "0", "--app-user-id", "alice"])
            #expect(changes.status == 0, "\(changes.stderr)")
            let rows = try changes.stdout.split(separator: "\n").map { try JSONDecoder().decode([String: ExportValue].self, from: Data($0.utf8)) }
            #expect(Set(rows.compactMap { $0["originalTransactionId"]?.text }) == alicePurchases)
            #expect(rows.allSatisfy { $0["appUserId"]?.text == "alice" })

            let repaired = try await mock.reconciler(["repair", "--app-user-id", "alice"])
            #expect(repaired.status == 0, "\(repaired.stdout)\n\(repaired.stderr)")
            let asked = try await mock.requests().values.reduce(0, +)
            let unknown = try await mock.reconciler(["repair", "--app-user-id", "carol"])
            #expect(unknown.status == 1)
            #expect(unknown.stderr.contains("no purchase stored in this database"), "\(unknown.stderr)")
            #expect(unknown.stderr.contains("--transaction-id"), "\(unknown.stderr)")
            #expect(try await mock.requests().values.reduce(0, +) == asked, "a repair of an unknown app user asked Apple")
        }
    }

    /// A JSON value of an export or feed line, enough to read its strings.
    enum ExportValue: Decodable {
        case text(String)
        case other

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            self = (try? container.decode(String.self)).map(ExportValue.text) ?? .other
        }

        var text: String? {
            if case .text(let text) = self { return text }
            return nil
        }
    }

    /// Beside a live `serve` and a run that recovers the outage, an import of every customer shares
    /// the app's budget: the mock's limit of 10 per second per endpoint is never passed (each alone
    /// at the budget of 6 would pass it together), nothing deadlocks, and export ends as the truth.
    @Test func besideServeAndARunTheBudgetIsShared() async throws {
        try await Rehearsal.with(
            customers: 60, seed: 135, mockArguments: ["--rate-limit", "10", "--latency-ms", "20"], environment: ["APP_STORE_RATE_LIMIT": "6"]
        ) { rehearsal in
            let orders = try await RepairTests.orders(rehearsal)
            let file = rehearsal.file("customers.csv")
            try ("transactionId\n" + Set(orders.map(\.originalTransactionId)).sorted().joined(separator: "\n") + "\n")
                .write(toFile: file, atomically: true, encoding: .utf8)
            try await rehearsal.resetMockStatistics()
            let run = try rehearsal.start(["run", "--start", rehearsal.outageStart, "--end", rehearsal.outageEnd, "--all", "--refresh-status"])
            try await eventually("the run") {
                try await rehearsal.db.count("SELECT count(*) FROM reconcile_runs WHERE status = 'running'") == 1
            }
            let imported = try await rehearsal.reconciler(["import", file])
            #expect(imported.status == 0, "\(imported.stdout)\n\(imported.stderr)")
            let result = try await run.wait()
            #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
            let stats = try await rehearsal.mockStatistics()
            #expect(stats["rateLimited"] as? Int == 0, "\(stats)")
            #expect(stats["retryAfterViolations"] as? Int == 0, "\(stats)")
            let export = try await rehearsal.export(), truth = try await rehearsal.truth()
            #expect(export == truth, "\(Rehearsal.difference(export, truth))")
        }
    }
}
