package import AppStoreServer
import Foundation
import ReconcilerDomain

/// Writes a process's API requests per endpoint per second on a run to the run's ledger, with the
/// budget its client kept to: only what the client did from the recorder's creation on (the
/// client counts for the whole process, which may work on several runs).
///
/// ```swift
/// let recorder = APITimelineRecorder(runId: run.runId, worker: holder, client: client, ledger: ledger)
/// // ... work on the run ...
/// try await recorder.record()        // or, when stopping: await recorder.recordDetached()
/// ```
///
/// Each recorder is one stint of one process on the run and rewrites its own rows with its totals
/// so far, so recording again (or a transaction retried after its commit's answer was lost) never
/// counts a request twice.
package struct APITimelineRecorder: Sendable {
    package let runId: Int64
    /// `host:pid:nonce#stint`.
    package let worker: String
    package let client: AppStoreServerAPIClient
    package let ledger: RunLedger
    package let atStart: APIStatistics.Timeline

    package init(runId: Int64, worker: String = ProcessIdentity.current, client: AppStoreServerAPIClient, ledger: RunLedger) {
        self.init(runId: runId, worker: worker, client: client, ledger: ledger, since: client.statistics.timeline)
    }

    /// A recorder of what the client did since `since` (a repair's requests before it was recorded count too).
    package init(runId: Int64, worker: String, client: AppStoreServerAPIClient, ledger: RunLedger, since atStart: APIStatistics.Timeline) {
        self.runId = runId
        self.worker = "\(worker)#\(UUID().uuidString.prefix(8).lowercased())"
        self.client = client
        self.ledger = ledger
        self.atStart = atStart
    }

    /// Writes what the client did since the recorder was made.
    package func record() async throws {
        try await Self.record(
            client.statistics.timeline.since(atStart), runId: runId, worker: worker, budget: client.requestsPerSecond, ledger: ledger)
    }

    /// The same, for a run that is stopping: not cancelled with the caller's task, giving up after
    /// a few seconds without the database, and never throwing (the run's outcome matters more).
    package func recordDetached() async {
        let (share, runId, worker, budget) = (client.statistics.timeline.since(atStart), runId, worker, client.requestsPerSecond)
        let ledger = RunLedger(database: ledger.database.with(unavailableTimeout: .seconds(5)))
        try? await Task.detached { try await Self.record(share, runId: runId, worker: worker, budget: budget, ledger: ledger) }.value
    }

    private static func record(
        _ share: APIStatistics.Timeline, runId: Int64, worker: String, budget: [AppStoreServerAPIEndpoint: Double],
        ledger: RunLedger
    ) async throws {
        try await ledger.recordAPITimeline(runId: runId, worker: worker, share, budget: budget)
    }
}
