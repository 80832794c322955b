import Synchronization

/// Gives up on database attempts that outlive their deadline: one task serves every attempt of the
/// process, waking in short ticks while any is in flight and ending when none is.
///
/// Why not a sleeping task per attempt, cancelled when the attempt ends: on Linux a cancelled
/// `Task.sleep` keeps its task and its timer until the deadline. At a thousand attempts a second
/// and a 30 s timeout, some 30,000 of them were alive at once (8 MB in heaptrack), long-lived small
/// blocks scattered among short-lived ones, and an import's resident memory kept growing with them.
///
/// ```swift
/// let watch = AttemptWatchdog.shared.watch(timeout: .seconds(30)) { attempt.cancel() }
/// defer { AttemptWatchdog.shared.unwatch(watch) }
/// ```
final class AttemptWatchdog: Sendable {
    static let shared = AttemptWatchdog()

    /// The longest wait between two looks: how late past its deadline an attempt may be given up.
    static let longestTick = Duration.milliseconds(500)

    private struct Watched {
        var deadline: ContinuousClock.Instant
        var expire: @Sendable () -> Void
    }

    private struct State {
        var lastId = 0
        var watched: [Int: Watched] = [:]
        var running = false
        var tick = AttemptWatchdog.longestTick
    }

    private let state = Mutex(State())

    /// The attempts being watched (for tests).
    var watchedCount: Int { state.withLock { $0.watched.count } }

    /// Watches an attempt until ``unwatch(_:)``: `expire` runs once, off the caller, if `timeout`
    /// passes first. Returns what names the attempt to ``unwatch(_:)``.
    func watch(timeout: Duration, expire: @escaping @Sendable () -> Void) -> Int {
        // A quarter of the timeout, so a short one (a test's) is still kept to within 25%.
        let tick = min(max(timeout / 4, .milliseconds(10)), Self.longestTick)
        let (id, start) = state.withLock { state in
            state.lastId &+= 1
            state.watched[state.lastId] = Watched(deadline: .now + timeout, expire: expire)
            state.tick = min(state.tick, tick)
            defer { state.running = true }
            return (state.lastId, !state.running)
        }
        if start { Task { await self.run() } }
        return id
    }

    /// Stops watching an attempt that ended (nothing happens when it had expired already).
    func unwatch(_ id: Int) {
        _ = state.withLock { $0.watched.removeValue(forKey: id) }
    }

    /// Looks every tick for attempts past their deadline; ends when none is left to watch. Its one
    /// sleep is never cancelled, so no timer outlives it.
    private func run() async {
        while true {
            try? await Task.sleep(for: state.withLock { $0.tick })
            let (expired, stop) = state.withLock { state in
                let now = ContinuousClock.now
                let due = state.watched.filter { $0.value.deadline <= now }
                for id in due.keys { state.watched[id] = nil }
                // Decided under the lock: a `watch` after this starts a loop of its own.
                if state.watched.isEmpty {
                    state.running = false
                    state.tick = Self.longestTick
                }
                return (Array(due.values), state.watched.isEmpty)
            }
            for attempt in expired { attempt.expire() }
            if stop { return }
        }
    }
}
