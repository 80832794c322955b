/// The replay's shards waiting for a worker, most urgent first, shared by the workers of one
/// process. A worker that finds it empty waits while other shards are still being paged, since a
/// dense one may split and hand it a piece; when nothing is left anywhere, every worker ends.
actor ShardQueue {
    private var pending: [ShardRecord]
    private var active = 0
    private var waiting: [CheckedContinuation<ShardRecord?, Never>] = []

    init(_ shards: [ShardRecord]) {
        pending = shards.sorted(by: Self.moreUrgent)
    }

    /// Workers waiting for a shard right now: the ones a split can feed.
    var idleWorkers: Int { waiting.count }

    /// The next shard to page, or `nil` when all are done.
    func next() async -> ShardRecord? {
        if !pending.isEmpty {
            active += 1
            return pending.removeFirst()
        }
        guard active > 0, !Task.isCancelled else { return nil }
        return await withCheckedContinuation { waiting.append($0) }
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
        while !waiting.isEmpty, !pending.isEmpty {
            active += 1
            waiting.removeFirst().resume(returning: pending.removeFirst())
        }
    }

    /// Ends the waits (the replay is stopping).
    func close() {
        pending.removeAll()
        wakeAll()
    }

    private func wakeAll() {
        for waiter in waiting { waiter.resume(returning: nil) }
        waiting.removeAll()
    }

    /// Plan order: the query's priority, then time.
    private static func moreUrgent(_ a: ShardRecord, _ b: ShardRecord) -> Bool {
        (a.shard.queryIndex, a.shard.start) < (b.shard.queryIndex, b.shard.start)
    }
}
