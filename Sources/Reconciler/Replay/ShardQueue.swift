import ReconcilerDomain
import ReconcilerStore

/// The replay's shards waiting for a worker, most urgent first, shared by the workers of one
/// process. A worker that finds it empty waits while other shards are still being paged, since a
/// dense one may split and hand it a piece; when nothing is left anywhere, every worker ends.
actor ShardQueue {
    private var pending: [ShardRecord]
    private var active = 0
    /// Once the replay is stopping, no worker takes or waits for a shard again (a failed worker
    /// never reports its shard finished, so `active` alone would keep the others waiting).
    private var closed = false
    private var waiting: [Int: CheckedContinuation<ShardRecord?, Never>] = [:]
    private var nextWaiter = 0

    init(_ shards: [ShardRecord]) {
        pending = shards.sorted(by: Self.moreUrgent)
    }

    /// Workers waiting for a shard right now: the ones a split can feed.
    var idleWorkers: Int { waiting.count }

    /// The next shard to page, or `nil` when all are done, the queue is closed, or the task is cancelled.
    func next() async -> ShardRecord? {
        guard !closed, !Task.isCancelled else { return nil }
        if !pending.isEmpty {
            active += 1
            return pending.removeFirst()
        }
        guard active > 0 else { return nil }
        let id = nextWaiter
        nextWaiter += 1
        return await withTaskCancellationHandler {
            await withCheckedContinuation { waiting[id] = $0 }
        } onCancel: {
            Task { await self.cancelWait(id) }
        }
    }

    private func cancelWait(_ id: Int) {
        waiting.removeValue(forKey: id)?.resume(returning: nil)
    }

    /// A worker finished the shard it took.
    func finished() {
        active -= 1
        if active == 0, pending.isEmpty { wakeAll() }
    }

    /// New shards (the pieces of a split): to waiting workers first.
    func add(_ shards: [ShardRecord]) {
        pending.append(contentsOf: shards)
        pending.sort(by: Self.moreUrgent)
        guard !closed else { return }
        while let id = waiting.keys.min(), !pending.isEmpty {
            active += 1
            waiting.removeValue(forKey: id)?.resume(returning: pending.removeFirst())
        }
    }

    /// Ends the waits and every later `next()` (the replay is stopping).
    func close() {
        closed = true
        pending.removeAll()
        wakeAll()
    }

    private func wakeAll() {
        for waiter in waiting.values { waiter.resume(returning: nil) }
        waiting.removeAll()
    }

    /// Plan order: the query's priority, then time.
    private static func moreUrgent(_ a: ShardRecord, _ b: ShardRecord) -> Bool {
        (a.shard.queryIndex, a.shard.start) < (b.shard.queryIndex, b.shard.start)
    }
}
