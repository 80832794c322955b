import Synchronization

/// Live counters of a run, read by the progress line and periodic log lines.
public final class RunProgress: Sendable {
    public struct Snapshot: Sendable {
        public var phase = "replay"
        public var shardsTotal = 0
        public var shardsDone = 0
        public var shardsFailed = 0
        public var pages = 0
        public var notificationsSeen = 0
        public var applied = 0
        public var duplicates = 0
        public var rejected = 0
        public var customersTotal = 0
        public var customersDone = 0
        public var customersFailed = 0
    }

    private let state = Mutex(Snapshot())

    public init() {}

    public func update(_ body: (inout Snapshot) -> Void) { state.withLock { body(&$0) } }
    public var snapshot: Snapshot { state.withLock { $0 } }
}
