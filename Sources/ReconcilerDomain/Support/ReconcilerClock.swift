import Synchronization

/// The time that leases and the shared request budget are judged by, injected so that tests move
/// it by hand (``ManualReconcilerClock``) instead of waiting for it. An instant is the time since
/// the clock's origin.
///
/// ```swift
/// let clock: any ReconcilerClock = .system
/// let expires = clock.now + .seconds(5)
/// try await clock.sleep(until: expires)
/// ```
package protocol ReconcilerClock: Sendable {
    /// Now: the time since this clock's origin.
    var now: Duration { get }
    /// Returns once `deadline` has come (at once when it has); throws `CancellationError` when
    /// the task is cancelled first.
    func sleep(until deadline: Duration) async throws
}

extension ReconcilerClock {
    /// Returns after `duration` of this clock.
    package func sleep(for duration: Duration) async throws {
        try await sleep(until: now + duration)
    }
}

/// The process's monotonic clock (`ContinuousClock`): it does not jump with the wall clock.
package struct SystemReconcilerClock: ReconcilerClock {
    /// Every system clock of the process counts from the same origin.
    private static let origin = ContinuousClock.now

    package init() {}

    package var now: Duration { ContinuousClock.now - Self.origin }

    package func sleep(until deadline: Duration) async throws {
        try await ContinuousClock().sleep(until: Self.origin + deadline)
    }
}

extension ReconcilerClock where Self == SystemReconcilerClock {
    /// The process's monotonic clock.
    package static var system: SystemReconcilerClock { SystemReconcilerClock() }
}

/// A clock that moves only when told, for tests: ``advance(by:)`` wakes every sleeper whose
/// deadline it passes. A test waits for the sleepers it expects (``sleepers``) before it
/// advances, so nothing depends on how fast the machine runs.
///
/// ```swift
/// let clock = ManualReconcilerClock()
/// let budget = SharedBudget(configuration: .init(claims: claims, clock: clock), ...)
/// clock.advance(by: .seconds(5))
/// ```
package final class ManualReconcilerClock: ReconcilerClock {
    private struct Sleeper {
        package var deadline: Duration
        package var continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        package var now: Duration = .zero
        package var nextId = 0
        package var sleepers: [Int: Sleeper] = [:]
    }

    private let state = Mutex(State())

    package init() {}

    package var now: Duration { state.withLock { $0.now } }

    /// How many tasks sleep on this clock now.
    package var sleepers: Int { state.withLock { $0.sleepers.count } }

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

    package func sleep(until deadline: Duration) async throws {
        let id = state.withLock { state in
            defer { state.nextId += 1 }
            return state.nextId
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let outcome: Result<Void, any Error>? = state.withLock { state in
                    if Task.isCancelled { return .failure(CancellationError()) }
                    if deadline <= state.now { return .success(()) }
                    state.sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
                    return nil
                }
                if let outcome { continuation.resume(with: outcome) }
            }
        } onCancel: {
            let sleeper = state.withLock { $0.sleepers.removeValue(forKey: id) }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }
}
