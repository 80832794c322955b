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

/// `export --transactions` against a real PostgreSQL after a recovery from the mock over HTTP: one
/// line per transaction with price, currency and storefront exactly as Apple signed them, its keys
/// in the order (EndToEndTests read its CSV back with Python); `--changed-since` keeps only
/// the rows written since; the history's states tile each purchase's life.
@Suite struct TransactionExportTests {
    @Test func theTransactionExportCarriesApplesPriceAndReadsBackAsCSV() async throws {
        try await TestDatabase.with { db in
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            let hour: Int64 = 3_600_000
            let scenario = ScenarioConfiguration(
                seed: 373, customers: 15, now: now, span: 24 * hour, outageStart: now - 20 * hour, outageEnd: now - hour)
            try await MockAppStore.withRunning(.init(scenario: scenario)) { mock, baseURL in
                let verifier = try mock.verifier()
                _ = try await ReconcileRun(
                    configuration: .init(
                        window: TimeWindow(milliseconds: (now - 23 * hour)..<now), dryRun: false, options: RunOptions(refreshStatus: true)),
                    scope: AppScope(target: verifier.configuration.target, entitlement: .init()), database: db.database, verifier: verifier,
                    client: mock.client(baseURL: baseURL)
                ).reconcile(progress: RunProgress())
                // What Apple signed, by transaction.
                var signed: [String: JWSTransactionDecodedPayload] = [:]
                for (notification, _) in mock.sentNotifications {
                    if let transaction = notification.transaction, let id = transaction.transactionId { signed[id] = transaction }
                }

                let store = PurchaseStore(logger: TestDatabase.logger)
                var rows: [ExportRow] = []
                try await store.exportTransactions(apps: nil, in: db.database) { rows.append($0) }
                #expect(rows.count == (try await db.count("SELECT count(*) FROM transactions")) && rows.count > 10)
                #expect(rows.allSatisfy { $0.fields.map(\.key) == PurchaseStore.transactionExportKeys })
                let json = try #require(rows.first).jsonLine()
                #expect(json.hasPrefix("{\"transactionId\":") && json.contains("\"appUserId\":null,\"updatedAt\":"), "\(json)")

                var compared = 0
                for row in rows {
                    func value(_ key: String) -> ExportRow.Value { row.fields.first { $0.key == key }!.value }
                    guard case .string(let id) = value("transactionId"), let apple = signed[id] else { continue }
                    compared += 1
                    #expect(value("price") == .init(apple.price), "\(id)")
                    #expect(value("currency") == .init(apple.currency), "\(id)")
                    #expect(value("storefront") == .init(apple.storefront), "\(id)")
                    #expect(value("productId") == .init(apple.productId), "\(id)")
                    #expect(value("revocationDate") == .init(apple.revocationDate), "\(id)")
                    #expect(value("appUserId") == .null)
                }
                #expect(compared > 10, "compared \(compared)")
                #expect(
                    rows.contains { row in
                        row.fields.filter { ["price", "currency", "storefront"].contains($0.key) }.allSatisfy { $0.value != .null }
                    })

                // The history: each purchase's states tile its life, the last one is its state now.
                var history: [String: [ExportRow]] = [:]
                try await store.exportHistory(apps: nil, in: db.database) { row in
                    let key = row.fields.prefix(3).map { "\($0.value)" }.joined(separator: " ")
                    history[key, default: []].append(row)
                }
                #expect(history.count == (try await db.count("SELECT count(*) FROM purchases")) && history.count > 5)
                #expect(try await store.prunedThroughChangeId(in: db.database) == 0)
                func value(_ row: ExportRow, _ key: String) -> ExportRow.Value? { row.fields.first { $0.key == key }?.value }
                var current: [String: String] = [:]
                try await store.exportPurchases(apps: nil, in: db.database) { current[$0.originalTransactionId] = $0.latestTransactionId ?? "" }
                for (purchase, states) in history {
                    #expect(
                        states.first.map { Array($0.fields.prefix(7).map(\.key)) } == [
                            "bundleId", "environment", "originalTransactionId", "validFrom", "validTo", "changeId", "source",
                        ])
                    for (state, next) in zip(states, states.dropFirst()) {
                        #expect(value(state, "validTo") == value(next, "validFrom"), "\(purchase)")
                    }
                    #expect(value(states.last!, "validTo") == .null, "\(purchase)")
                    guard case .string(let original) = value(states.last!, "originalTransactionId") else { continue }
                    #expect(value(states.last!, "latestTransactionId") == .string(current[original] ?? "?"), "\(purchase)")
                }

                // --changed-since: nothing written after now; one row rewritten since is the only one.
                var later: [ExportRow] = []
                let mark = Timestamp.now
                try await store.exportTransactions(apps: nil, changedSince: mark + .seconds(1), in: db.database) { later.append($0) }
                #expect(later.isEmpty)
                let touched = try #require(rows.last?.fields.first?.value)
                guard case .string(let touchedId) = touched else { throw Stop() }
                try await db.execute("UPDATE transactions SET updated_at = now() + interval '1 hour' WHERE transaction_id = \(touchedId)")
                try await store.exportTransactions(apps: nil, changedSince: mark + .seconds(1), in: db.database) { later.append($0) }
                #expect(later.map { $0.fields[0].value } == [.string(touchedId)])
            }
        }
    }

    struct Stop: Error {}
}
