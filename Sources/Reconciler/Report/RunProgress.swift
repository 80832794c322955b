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
        package var customersTotal = 0
        package var customersDone = 0
        package var customersFailed = 0
    }

    private let state = Mutex(Snapshot())

    package init() {}

    package func update(_ body: (inout Snapshot) -> Void) { state.withLock { body(&$0) } }
    package var snapshot: Snapshot { state.withLock { $0 } }
}
