import Synchronization

/// Whether a ``Database``'s PostgreSQL client has been started: every use of the client waits for
/// it, so nothing asks the pool for a connection before `PostgresClient.run()` was called (the
/// lease would only wait for it, and PostgresNIO warns of it: a command that started its work
/// beside the client, in a task group or a service group, used to print that warning at start).
///
/// ```swift
/// let start = ClientStart(started: false)
/// group.addImmediateTask { await client.run() }   // marks the client running before it returns
/// start.markStarted()
/// await start.wait()   // elsewhere: returns once markStarted() was called, or the task is cancelled
/// ```
final class ClientStart: Sendable {
    private struct State {
        var started: Bool
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
        var nextId = 0
    }

    private let state: Mutex<State>

    /// `started`: the client is run by whoever made it (the tests run theirs themselves).
    init(started: Bool) {
        state = Mutex(State(started: started))
    }

    /// How many tasks wait for the start now (for tests).
    var waiting: Int { state.withLock { $0.waiters.count } }

    func markStarted() {
        let waiters = state.withLock { state in
            state.started = true
            defer { state.waiters.removeAll() }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once the client was started, or when the task is cancelled (its lease then fails
    /// as cancelled, as it would have).
    func wait() async {
        let id: Int? = state.withLock { state in
            guard !state.started else { return nil }
            defer { state.nextId += 1 }
            return state.nextId
        }
        guard let id else { return }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let resumeNow = state.withLock { state in
                    if state.started || Task.isCancelled { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.resume()
        }
    }
}
