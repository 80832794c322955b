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

/// Phase 2's queue shared by several workers (as `reconciler work` on other machines would).
@Suite struct GapFillerTests {
    @Test func workersShareTheQueueAndNoCustomerIsProcessedTwice() async throws {
        try await TestDatabase.with { db in
            var faults = FaultConfiguration()
            faults.latencyMilliseconds = 15
            try await MockAppStore.withRunning(.init(scenario: .init(seed: 9, customers: 50), faults: faults)) { mock, baseURL in
                let verifier = try mock.verifier()
                let ledger = RunLedger(database: db.database)
                let run = try await ledger.createRun(
                    kind: .manual, app: AppTarget(bundleId: mock.configuration.scenario.bundleId, environment: .production),
                    window: TimeWindow(milliseconds: 0..<1),
                    dryRun: false, options: .init(refreshStatus: true), shards: [], holder: "test")
                try await ledger.setPhase(runId: run.runId, .gapFill)
                let originals = Array(Set(mock.sentNotifications.compactMap(\.notification.originalTransactionId)))
                try await db.database.transaction { try await ledger.enqueue(runId: run.runId, anchors: originals, reason: .touched, on: $0) }

                func worker(_ name: String) -> RunWorker {
                    RunWorker(
                        configuration: .init(runId: run.runId, concurrency: 2, worker: name),
                        scope: AppScope(target: verifier.configuration.target, entitlement: .init()), database: db.database, verifier: verifier,
                        client: mock.client(baseURL: baseURL))
                }
                async let first: Void = worker("worker-a").work(progress: RunProgress())
                async let second: Void = worker("worker-b").work(progress: RunProgress())
                _ = try await (first, second)

                let summary = try await ledger.queueSummary(runId: run.runId)
                #expect(summary.open == 0)
                #expect(summary.failed == 0)
                #expect(summary.done == originals.count)
                #expect(try await db.count("SELECT max(attempts) FROM gap_queue") == 1)
                #expect(try await db.count("SELECT count(DISTINCT worker) FROM gap_queue WHERE worker LIKE 'worker-%'") == 2)
                // Every purchase got its state from history and statuses, and a revision was stored per customer fetched.
                #expect(try await db.count("SELECT count(*) FROM purchases") == mock.truth.count)
                // One revision per customer: every purchase points at a customer whose revision is stored.
                #expect(try await db.count("SELECT count(*) FROM history_revisions") > 0)
                #expect(
                    try await db.count(
                        """
                        SELECT count(*) FROM purchases p
                        WHERE NOT EXISTS (SELECT 1 FROM history_revisions r WHERE r.anchor_transaction_id = p.history_anchor_transaction_id)
                        """) == 0)
                // Transaction history and statuses alone give the truth, except which notification was last.
                let stored = try await db.count(
                    """
                    SELECT count(*) FROM purchases p WHERE latest_transaction_id IS NOT NULL
                    """)
                #expect(stored == mock.truth.count)
            }
        }
    }

    /// Phase 2's progress counts come from the queue: the customers phase 1 queues after phase 2
    /// started are in the total, so the progress line never shows more done than there are (it
    /// read `gap fill: customers 34/11`, the total taken once when phase 2 started).
    @Test func progressCountsTheCustomersQueuedWhilePhaseTwoWorks() async throws {
        try await TestDatabase.with { db in
            try await MockAppStore.withRunning(.init(scenario: .init(seed: 19, customers: 12))) { mock, baseURL in
                let verifier = try mock.verifier()
                let ledger = RunLedger(database: db.database)
                // Still in phase 1 (replay): the worker waits for the customers it queues.
                let run = try await ledger.createRun(
                    kind: .manual, app: AppTarget(bundleId: mock.configuration.scenario.bundleId, environment: .production),
                    window: TimeWindow(milliseconds: 0..<1),
                    dryRun: false, options: .init(), shards: [], holder: "test")
                let customers = Array(Set(mock.sentNotifications.compactMap(\.notification.originalTransactionId))).sorted()
                #expect(customers.count > 4)
                let (first, later) = (Array(customers.prefix(2)), Array(customers.dropFirst(2)))
                try await db.database.transaction { try await ledger.enqueue(runId: run.runId, anchors: first, reason: .touched, on: $0) }
                let progress = RunProgress()
                let worker = RunWorker(
                    configuration: .init(runId: run.runId, concurrency: 2, worker: "worker"),
                    scope: AppScope(target: verifier.configuration.target, entitlement: .init()), database: db.database, verifier: verifier,
                    client: mock.client(baseURL: baseURL))
                let working = Task { try await worker.work(progress: progress) }
                // Once phase 2 finished a customer it has read the queue; then phase 1 queues the rest and ends.
                try await eventually("a customer done") { try await ledger.queueSummary(runId: run.runId).done > 0 }
                try await db.database.transaction { try await ledger.enqueue(runId: run.runId, anchors: later, reason: .touched, on: $0) }
                try await ledger.setPhase(runId: run.runId, .gapFill)
                try await working.value

                let snapshot = progress.snapshot
                #expect(snapshot.customersTotal == customers.count)
                #expect(snapshot.customersDone == customers.count)
                #expect(snapshot.customersDone <= snapshot.customersTotal)
                // This process's own tally counts the histories it read (a customer's other purchases complete with it).
                #expect(snapshot.customersDoneHere > 0 && snapshot.customersDoneHere <= customers.count)
            }
        }
    }
}
