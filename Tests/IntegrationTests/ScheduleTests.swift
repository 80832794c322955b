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

/// Scheduled runs, in process against PostgreSQL and the mock App Store: a phase-2 worker's
/// connections.
@Suite(.serialized) struct ScheduleTests {
    /// A phase-2 worker needs one connection at a time, even for customers whose history has
    /// many pages (the first version held its claim's connection and asked the pool for another).
    @Test func aPhaseTwoWorkerNeedsOneConnectionAtATime() async throws {
        try await TestDatabase.with { db in
            let scenario = ScenarioConfiguration(seed: 61, customers: 12)
            // Pages of three transactions: most customers' histories need several pages.
            try await MockAppStore.withRunning(.init(scenario: scenario, pageSize: 3)) { mock, baseURL in
                let single = PostgresClient(
                    configuration: try DatabaseSettings(url: db.url, maximumConnections: 1).clientConfiguration,
                    backgroundLogger: TestDatabase.logger)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { await single.run() }
                    defer { group.cancelAll() }
                    let database = Database(client: single, logger: TestDatabase.logger)
                    let ledger = RunLedger(database: database)
                    let run = try await ledger.createRun(
                        kind: .manual, app: AppTarget(bundleId: scenario.bundleId, environment: .production), window: TimeWindow(milliseconds: 0..<1),
                        dryRun: false, options: .init(refreshStatus: true), shards: [], holder: "test")
                    try await ledger.setPhase(runId: run.runId, .gapFill)
                    let customers = Array(Set(mock.truth.map(\.originalTransactionId)))
                    try await database.transaction { try await ledger.enqueue(runId: run.runId, anchors: customers, reason: .touched, on: $0) }
                    let verifier = try mock.verifier()
                    let worker = RunWorker(
                        configuration: .init(runId: run.runId, concurrency: 1, worker: "single"),
                        scope: AppScope(target: verifier.configuration.target, entitlement: .init()), database: database, verifier: verifier,
                        client: mock.client(baseURL: baseURL))
                    // A worker that needed a second connection would wait for it forever.
                    let finished = try await withThrowingTaskGroup(of: Bool.self) { race in
                        race.addTask {
                            try await worker.work(progress: RunProgress())
                            return true
                        }
                        race.addTask {
                            // Only a deadlock takes this long, however busy the machine.
                            try await Task.sleep(for: .seconds(600))
                            return false
                        }
                        defer { race.cancelAll() }
                        return try await race.next() ?? false
                    }
                    #expect(finished, "the worker did not finish with one connection")
                    #expect(try await ledger.queueSummary(runId: run.runId).done == customers.count)
                    let longest = try await db.count("SELECT max(transactions_seen) FROM gap_queue")
                    #expect(longest > 6, "the longest history had \(longest) transactions: no customer needed a third page")
                }
            }
        }
    }

}
