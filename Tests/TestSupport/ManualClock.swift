package import AppStoreServer
import Synchronization

/// A clock that moves only when told, for tests: ``advance(by:)`` wakes every sleeper whose
/// deadline it passes. A test waits for the sleepers it expects (``waitForSleepers(_:)``) before
/// it advances, so nothing depends on how fast the machine runs.
///
/// ```swift
/// let clock = ManualClock()
/// let limiter = RateLimiter(configuration: .init(requestsPerSecond: [.getTransactionHistory: 10], clock: clock))
/// let turn = Task { try await limiter.waitForTurn(.getTransactionHistory) }
/// await clock.waitForSleepers(1)
/// clock.advance(by: .milliseconds(100))
/// ```
package final class ManualClock: MonotonicClock {
    private struct Sleeper {
        var deadline: Duration
        var continuation: CheckedContinuation<Void, any Error>
    }

    /// A task waiting for at least `count` sleepers.
    private struct Watcher {
        var count: Int
        var continuation: CheckedContinuation<Void, Never>
    }

    private struct State {
        var now: Duration = .zero
        var nextId = 0
        var sleepers: [Int: Sleeper] = [:]
        var watchers: [Int: Watcher] = [:]

        /// Takes the watchers whose count of sleepers has come.
        mutating func satisfiedWatchers() -> [CheckedContinuation<Void, Never>] {
            let satisfied = watchers.filter { $0.value.count <= sleepers.count }
            for id in satisfied.keys { watchers[id] = nil }
            return satisfied.values.map(\.continuation)
        }

        mutating func newId() -> Int {
            defer { nextId += 1 }
            return nextId
        }
    }

    private let state = Mutex(State())

    package init() {}

    package var now: Duration { state.withLock { $0.now } }

    /// How many tasks sleep on this clock now.
    package var sleepers: Int { state.withLock { $0.sleepers.count } }

    /// The deadlines tasks sleep until, earliest first.
    package var deadlines: [Duration] { state.withLock { $0.sleepers.values.map(\.deadline).sorted() } }

    /// The earliest deadline a task sleeps until; `nil` when none sleeps.
    package var nextDeadline: Duration? { deadlines.first }

    /// Moves the clock on and wakes the sleepers whose deadline has come, earliest first.
    package func advance(by duration: Duration) {
        let due = state.withLock { state in
            state.now += duration
            let due = state.sleepers.filter { $0.value.deadline <= state.now }.sorted { $0.value.deadline < $1.value.deadline }
            for (id, _) in due { state.sleepers[id] = nil }
            return due.map(\.value.continuation)
        }
        for continuation in due { continuation.resume() }
    }

    /// Moves the clock on to `instant` (not back: an instant already past leaves it where it is).
    package func advance(to instant: Duration) {
        advance(by: max(instant - now, .zero))
    }

    /// Returns once at least `count` tasks sleep on this clock (at once when they do already), so
    /// a test advances only after the tasks it drives have come to their waits.
    package func waitForSleepers(_ count: Int) async {
        let id = state.withLock { $0.newId() }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state in
                    if Task.isCancelled || state.sleepers.count >= count { return true }
                    state.watchers[id] = Watcher(count: count, continuation: continuation)
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.watchers.removeValue(forKey: id) }?.continuation.resume()
        }
    }

    package func sleep(until deadline: Duration) async throws {
        let id = state.withLock { $0.newId() }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let (outcome, watchers) = state.withLock { state -> (Result<Void, any Error>?, [CheckedContinuation<Void, Never>]) in
                    if Task.isCancelled { return (.failure(CancellationError()), []) }
                    if deadline <= state.now { return (.success(()), []) }
                    state.sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
                    return (nil, state.satisfiedWatchers())
                }
                if let outcome { continuation.resume(with: outcome) }
                for watcher in watchers { watcher.resume() }
            }
        } onCancel: {
            let sleeper = state.withLock { $0.sleepers.removeValue(forKey: id) }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }
}
