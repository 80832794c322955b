import AppStoreServer
import Foundation
import MockAppStore
import PostgresNIO
import ReconcilerDomain
import ReconcilerShared
import TestSupport
import Testing

@testable import Reconciler
@testable import ReconcilerStore

/// `reconciler import` against the mock over HTTP into a real PostgreSQL: the customers a file
/// names are read once each, whatever mix of IDs names them, and a rerun reads nothing complete.
@Suite struct ImportTests {
    /// The import of `text` (CSV), its file checked first as the command does.
    static func importing(
        _ text: String, into db: TestDatabase, target: CustomerImport.Target, refresh: Bool = false
    ) async throws
        -> CustomerImport.Result
    {
        func reader() -> ImportFileReader { ImportFileReader(format: .csv, source: .bytes(Array(text.utf8))) }
        var checking = reader()
        let check = try ImportFileCheck.scan(&checking)
        return try await CustomerImport(configuration: .init(refresh: refresh, worker: "test"), targets: [target], database: db.database)
            .run(rows: reader, check: check)
    }

    static func total(_ mock: MockAppStore) -> Int { mock.statisticsSnapshot.requests.values.reduce(0, +) }

    @Test func mixedIdsIntoAnEmptyDatabaseGiveTheTruthOfThoseCustomersEachReadOnce() async throws {
        try await TestDatabase.with { db in
            try await MockAppStore.withRunning(.init(scenario: .init(seed: 35, customers: 16))) { mock, baseURL in
                let verifier = try mock.verifier()
                let target = CustomerImport.Target(
                    scope: AppScope(target: verifier.configuration.target, entitlement: .init(nonRenewingTerms: mock.nonRenewingTerms)),
                    verifier: verifier,
                    client: mock.client(baseURL: baseURL))
                let byAccount = Dictionary(grouping: mock.orders, by: \.account)
                let accounts = byAccount.keys.sorted()
                #expect(accounts.count >= 8)
                var lines = ["appUserId,transactionId,orderId"]
                var named: [String] = []
                var byOrder: [String] = []
                // The appUserId each customer is named with: their purchases carry it.
                var userIds: [String: String] = [:]
                for (index, account) in accounts.enumerated() {
                    let orders = byAccount[account]!.sorted { $0.transactionId < $1.transactionId }
                    switch index % 4 {
                    case 0:
                        lines.append("user-\(index),\(orders[0].originalTransactionId),")
                        named.append(account)
                        userIds[account] = "user-\(index)"
                    case 1:
                        // A later transaction's ID, and the next row naming the same customer by its original
                        // and appUserId (rows in flight at once are known as one customer by an ID or appUserId).
                        let later = orders.last { $0.transactionId != $0.originalTransactionId } ?? orders[0]
                        lines.append("\"user, \(index)\",\(later.transactionId),")
                        lines.append("\"user, \(index)\",\(orders[0].originalTransactionId),")
                        named.append(account)
                        userIds[account] = "user, \(index)"
                    case 2:
                        lines.append("user-\(index),,\(orders[0].orderId)")
                        named.append(account)
                        userIds[account] = "user-\(index)"
                        byOrder.append(account)
                    default:
                        break  // not in the file: not imported
                    }
                }
                lines.append(",9999999999999991,")
                let unknownTransactionLine = lines.count
                lines.append("")
                lines.append(",,ZZZZZZZZZZ")
                let unknownOrderLine = lines.count
                let text = lines.joined(separator: "\r\n") + "\r\n"

                let result = try await Self.importing(text, into: db, target: target)
                #expect(result.ending == nil, "\(result.failures)")
                #expect(result.report.customers == named.count)
                // The second row of a customer: the same ID (one transaction), or another of theirs (no request either way).
                #expect(result.sameCustomer + result.alreadyComplete == accounts.count / 4 + (accounts.count % 4 > 1 ? 1 : 0))
                #expect(result.sameCustomer > 0)
                #expect(result.report.notFoundCount == 2)
                #expect(
                    result.report.notFound == [
                        .init(line: unknownTransactionLine, transactionId: "9999999999999991"), .init(line: unknownOrderLine, orderId: "ZZZZZZZZZZ"),
                    ])
                // Each customer read once: one status request each, one lookup per order (and the unknown one).
                let requests = mock.statisticsSnapshot.requests
                #expect(requests["Get All Subscription Statuses"] == named.count, "\(requests)")
                #expect(requests["Look Up Order ID"] == byOrder.count + 1, "\(requests)")
                #expect(result.report.requests["Get All Subscription Statuses"] == named.count)

                // export equals the mock's truth for those customers, and holds no one else.
                let now = Timestamp.now
                let originals = Set(named.flatMap { byAccount[$0]!.map(\.originalTransactionId) })
                let accountOf = Dictionary(mock.orders.map { ($0.originalTransactionId, $0.account) }, uniquingKeysWith: { first, _ in first })
                // Which notification was signed last is the one thing transaction history cannot say.
                func withoutLastSignedDate(_ state: PurchaseState) throws -> String {
                    var state = state
                    state.lastSignedDate = nil
                    return try state.jsonLine()
                }
                let truth = try mock.truthJSONLines(at: now.millisecondsSince1970).split(separator: "\n").map {
                    try JSONDecoder().decode(PurchaseState.self, from: Data($0.utf8))
                }.filter { originals.contains($0.originalTransactionId) }.map { state in
                    var state = state
                    state.appUserId = accountOf[state.originalTransactionId].flatMap { userIds[$0] }
                    return try withoutLastSignedDate(state)
                }
                var exported: [String] = []
                try await PurchaseStore(database: db.database, scope: target.scope).exportPurchases(
                    apps: nil, entitlements: [target.scope.target: target.scope.entitlement], at: now, in: db.database
                ) { exported.append(try withoutLastSignedDate($0)) }
                #expect(!truth.isEmpty)
                #expect(exported.count == truth.count)
                #expect(Set(exported) == Set(truth), "\(Rehearsal.difference(exported.joined(separator: "\n"), truth.joined(separator: "\n")))")
                #expect(result.report.created == truth.count)
                #expect(try await db.count("SELECT count(*) FROM reconcile_runs WHERE kind = 'import' AND status = 'succeeded'") == 1)

                // The same file again: no request.
                let before = Self.total(mock)
                let again = try await Self.importing(text, into: db, target: target)
                #expect(Self.total(mock) == before)
                #expect(again.report.customers == 0)
                #expect(again.report.notFoundCount == 2)
                #expect(again.alreadyComplete == lines.count - 4)
            }
        }
    }

    /// Rows naming one customer by different transaction IDs (the first purchase's original, a
    /// renewal's, another purchase's), next to each other and with no appUserId, all in flight at
    /// once (the mock answers slowly): each customer is read once. The later rows learn from their
    /// first page of history that another row has the customer and stop there, with no status
    /// request. Before, each row read the whole customer.
    @Test func rowsInFlightNamingOneCustomerByDifferentIdsReadItOnce() async throws {
        var faults = FaultConfiguration()
        faults.latencyMilliseconds = 150
        try await TestDatabase.with { db in
            try await MockAppStore.withRunning(.init(scenario: .init(seed: 37, customers: 8), faults: faults)) { mock, baseURL in
                let setup = try AppUserIdTests.setup(mock, baseURL: baseURL)
                var lines = ["transactionId"]
                var repeated = 0
                for account in setup.accounts {
                    let ids = setup.transactions[account]!.union(setup.purchases[account]!).sorted()
                    lines += ids.prefix(3)
                    repeated += min(ids.count, 3) - 1
                }
                #expect(repeated >= 4, "the scenario has too few customers with several transactions")
                let result = try await Self.importing(lines.joined(separator: "\n") + "\n", into: db, target: setup.target)
                #expect(result.ending == nil, "\(result.failures)")
                #expect(result.report.customers == setup.accounts.count)
                #expect(result.sameCustomer == repeated)
                let requests = mock.statisticsSnapshot.requests
                #expect(requests["Get All Subscription Statuses"] == setup.accounts.count, "\(requests)")
                let purchases = setup.purchases.values.reduce(0) { $0 + $1.count }
                #expect(result.report.created == purchases)
                #expect(try await db.count("SELECT count(*) FROM purchases") == purchases)
            }
        }
    }

    /// Killed halfway and run again (here: the first half of the file imported, then the whole):
    /// only the customers not complete are read, nothing twice.
    @Test func aGrownFileReadsOnlyItsNewCustomers() async throws {
        try await TestDatabase.with { db in
            try await MockAppStore.withRunning(.init(scenario: .init(seed: 36, customers: 10))) { mock, baseURL in
                let verifier = try mock.verifier()
                let target = CustomerImport.Target(
                    scope: AppScope(target: verifier.configuration.target, entitlement: .init(nonRenewingTerms: mock.nonRenewingTerms)),
                    verifier: verifier,
                    client: mock.client(baseURL: baseURL))
                let originals = Array(Set(mock.orders.map(\.originalTransactionId))).sorted()
                let byAccount = Dictionary(grouping: mock.orders, by: \.account)
                // One row per customer.
                let rows = byAccount.keys.sorted().map { byAccount[$0]![0].originalTransactionId }
                #expect(rows.count >= 4 && originals.count >= rows.count)
                let half = rows.count / 2
                let first = try await Self.importing("transactionId\n" + rows.prefix(half).joined(separator: "\n"), into: db, target: target)
                #expect(first.report.customers == half)
                let statusesBefore = mock.statisticsSnapshot.requests["Get All Subscription Statuses"] ?? 0
                let whole = try await Self.importing("transactionId\n" + rows.joined(separator: "\n"), into: db, target: target)
                #expect(whole.report.customers == rows.count - half)
                #expect(whole.alreadyComplete == half)
                #expect(mock.statisticsSnapshot.requests["Get All Subscription Statuses"] == statusesBefore + rows.count - half)
                // --refresh reads everyone again, each once.
                let refreshed = try await Self.importing("transactionId\n" + rows.joined(separator: "\n"), into: db, target: target, refresh: true)
                #expect(refreshed.report.customers == rows.count)
                #expect(refreshed.report.created == 0)
                #expect(mock.statisticsSnapshot.requests["Get All Subscription Statuses"] == statusesBefore + 2 * rows.count - half)
            }
        }
    }

    /// Killed halfway (the task cancelled, as SIGTERM does) and run again: it reads only the
    /// customers not complete, so none is applied twice, and the first run is recorded interrupted.
    @Test func killedHalfwayAndRunAgainItReadsNoCompletedCustomerAgain() async throws {
        try await TestDatabase.with { db in
            var faults = FaultConfiguration()
            faults.latencyMilliseconds = 20
            try await MockAppStore.withRunning(.init(scenario: .init(seed: 37, customers: 16), faults: faults)) { mock, baseURL in
                let verifier = try mock.verifier()
                let target = CustomerImport.Target(
                    scope: AppScope(target: verifier.configuration.target, entitlement: .init()), verifier: verifier,
                    client: mock.client(baseURL: baseURL))
                let byAccount = Dictionary(grouping: mock.orders, by: \.account)
                let text = "transactionId\n" + byAccount.keys.sorted().map { byAccount[$0]![0].originalTransactionId }.joined(separator: "\n")
                let rows = byAccount.count
                func reader() -> ImportFileReader { ImportFileReader(format: .csv, source: .bytes(Array(text.utf8))) }
                var checking = reader()
                let check = try ImportFileCheck.scan(&checking)
                let progress = ImportProgress()
                let killed = Task {
                    try await CustomerImport(configuration: .init(worker: "test"), targets: [target], database: db.database)
                        .run(rows: reader, check: check, progress: progress)
                }
                try await eventually("half the rows imported") { progress.snapshot.rowsDone >= rows / 2 }
                killed.cancel()
                await #expect(throws: (any Error).self) { _ = try await killed.value }
                #expect(try await db.count("SELECT count(*) FROM reconcile_runs WHERE kind = 'import' AND status = 'interrupted'") == 1)
                let completed = try await db.count("SELECT count(*) FROM import_completions")
                #expect(completed >= rows / 2 && completed < rows)
                let statusesAtKill = mock.statisticsSnapshot.requests["Get All Subscription Statuses"] ?? 0
                #expect(
                    statusesAtKill <= completed + CustomerImport.Configuration().concurrency,
                    "at most the customers in flight were read without being completed")

                let rerun = try await Self.importing(text, into: db, target: target)
                #expect(rerun.ending == nil)
                #expect(rerun.alreadyComplete == completed)
                #expect(rerun.report.customers == rows - completed)
                #expect(mock.statisticsSnapshot.requests["Get All Subscription Statuses"] == statusesAtKill + rows - completed)
                #expect(try await db.count("SELECT count(*) FROM import_completions") == rows)
                // Nothing applied twice: no purchase has two feed rows creating it.
                #expect(
                    try await db.count(
                        "SELECT count(*) FROM (SELECT 1 FROM purchase_changes WHERE before_state IS NULL GROUP BY original_transaction_id HAVING count(*) > 1) d"
                    )
                        == 0)
            }
        }
    }

    /// Apple failing (5xx) is retryable: the import ends with exit 2, completes nothing it could
    /// not read, and a rerun once Apple answers reads those customers.
    @Test func whatAppleFailsIsRetryableAndTheRerunReadsIt() async throws {
        try await TestDatabase.with { db in
            try await MockAppStore.withRunning(.init(scenario: .init(seed: 38, customers: 4))) { mock, baseURL in
                let verifier = try mock.verifier()
                let target = CustomerImport.Target(
                    scope: AppScope(target: verifier.configuration.target, entitlement: .init()), verifier: verifier,
                    client: mock.client(baseURL: baseURL, retryPolicy: .init(maximumAttempts: 1)))
                let originals = Array(Set(mock.orders.map(\.originalTransactionId))).sorted()
                let text = "transactionId\n" + originals[0] + "\n"
                var faults = FaultConfiguration()
                faults.serverErrorRate = 1
                mock.setFaults(faults)
                let failed = try await Self.importing(text, into: db, target: target)
                #expect(failed.ending?.exitCode == 2, "\(String(describing: failed.ending))")
                #expect(failed.retryableFailures == 1 && failed.failures.map(\.line) == [2])
                #expect(try await db.count("SELECT count(*) FROM import_completions") == 0)
                #expect(try await db.count("SELECT count(*) FROM reconcile_runs WHERE kind = 'import' AND status = 'partial'") == 1)
                mock.setFaults(FaultConfiguration())
                let rerun = try await Self.importing(text, into: db, target: target)
                #expect(rerun.ending == nil)
                #expect(rerun.report.customers == 1)
            }
        }
    }
}
