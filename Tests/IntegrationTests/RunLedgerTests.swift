import AppStoreServer
import Foundation
import PostgresNIO
import ReconcilerDomain
import ReconcilerShared
import TestSupport
import Testing

@testable import Reconciler
@testable import ReconcilerStore

/// The run ledger reads back only the states it writes: a value this version does not know (a
/// newer version's, or a hand edit's) is refused with a code, never guessed.
@Suite struct RunLedgerTests {
    static let logger = TestDatabase.logger

    static func createRun(_ ledger: RunLedger) async throws -> RunRecord {
        let shard = ReplayPlanner.Shard(queryIndex: 0, filter: .init(nil, nil), start: 0, end: 3_600_000)
        return try await ledger.createRun(
            kind: .manual, app: AppTarget(bundleId: "com.example", environment: .production), window: TimeWindow(milliseconds: 0..<3_600_000),
            dryRun: false,
            options: RunOptions(), shards: [shard], holder: "test")
    }

    /// A run whose status a newer version wrote is not read as `failed` (which would resume it),
    /// nor a shard's unknown status as `pending` (which would read it again).
    @Test func anUnknownStoredStateIsRefusedNotGuessed() async throws {
        try await TestDatabase.with { db in
            let ledger = RunLedger(database: db.database)
            let run = try await Self.createRun(ledger)
            #expect(try await ledger.run(id: run.runId)?.status == .running)
            #expect(try await ledger.shards(runId: run.runId).map(\.status) == [.pending])

            // What a newer version could write: its own CHECK constraints, a state this one lacks.
            try await db.execute("ALTER TABLE reconcile_runs DROP CONSTRAINT reconcile_runs_status_check")
            try await db.execute("UPDATE reconcile_runs SET status = 'archived' WHERE run_id = \(run.runId)")
            let runError = await #expect(throws: ReconcilerError.self) { try await ledger.run(id: run.runId) }
            #expect(runError?.code == .unknownStoredValue)

            try await db.execute("ALTER TABLE run_shards DROP CONSTRAINT IF EXISTS run_shards_status_check")
            try await db.execute("UPDATE run_shards SET status = 'skipped' WHERE run_id = \(run.runId)")
            let shardError = await #expect(throws: ReconcilerError.self) { try await ledger.shards(runId: run.runId) }
            #expect(shardError?.code == .unknownStoredValue)
        }
    }
}
