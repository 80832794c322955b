import Synchronization

/// Live counters of a run, read by the progress line and periodic log lines.
package final class RunProgress: Sendable {
    package struct Snapshot: Sendable {
        package var phase = "replay"
        package var shardsTotal = 0
        package var shardsDone = 0
        package var shardsFailed = 0
        package var pages = 0
        package var notificationsSeen = 0
        package var applied = 0
        package var duplicates = 0
        package var rejected = 0
        /// Phase 2's queue as the run's ledger holds it (every process of the run, customers
        /// phase 1 queued after phase 2 started included): a customer read again is counted once.
        package var customersTotal = 0
        package var customersDone = 0
        package var customersFailed = 0
        /// The customers this process finished and failed (`reconciler work` reports its own share).
        package var customersDoneHere = 0
        package var customersFailedHere = 0
    }

    private let state = Mutex(Snapshot())

    package init() {}

    package func update(_ body: (inout Snapshot) -> Void) { state.withLock { body(&$0) } }
    package var snapshot: Snapshot { state.withLock { $0 } }
}
