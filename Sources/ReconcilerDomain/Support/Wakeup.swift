import Synchronization

/// Lets tasks that ran out of work wait for more: ``wait(upTo:)`` returns when ``notify()`` is
/// called, when the time passes, or when the task is cancelled, whichever comes first.
///
/// Nothing of a wait outlives it: a run's idle workers wait thousands of times a minute, so an id
/// left behind by each would grow a long run's memory without bound.
package final class Wakeup: Sendable {
    private struct State {
        package var nextId = 0
        /// Waits that have not returned yet.
        package var active: Set<Int> = []
        package var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
        /// Active waits whose time passed (or were cancelled) before they began to wait.
        package var over: Set<Int> = []
    }

    private let state = Mutex(State())

    package init() {}

    /// Wakes every task waiting now.
    package func notify() {
        let waiters = state.withLock { state in
            defer { state.waiters.removeAll() }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    package func wait(upTo timeout: Duration) async {
        let id = state.withLock { state in
            defer { state.nextId += 1 }
            state.active.insert(state.nextId)
            return state.nextId
        }
        let timer = Task { [weak self] in
            do { try await Task.sleep(for: timeout) } catch { return }
            self?.resume(id)
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let over = state.withLock { state in
                    if Task.isCancelled || state.over.remove(id) != nil { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if over { continuation.resume() }
            }
        } onCancel: {
            resume(id)
        }
        timer.cancel()
        state.withLock { state in
            state.active.remove(id)
            state.over.remove(id)
        }
    }

    /// Ends wait `id`: at once when it waits, when it begins to when it has not yet; nothing
    /// when it has returned already (a timer that fired as `notify()` woke it).
    private func resume(_ id: Int) {
        let waiter = state.withLock { state in
            guard let waiter = state.waiters.removeValue(forKey: id) else {
                if state.active.contains(id) { state.over.insert(id) }
                return nil as CheckedContinuation<Void, Never>?
            }
            return waiter
        }
        waiter?.resume()
    }

    /// Waits not returned yet and ids kept for them, for tests.
    package var retained: (active: Int, over: Int, waiters: Int) {
        state.withLock { ($0.active.count, $0.over.count, $0.waiters.count) }
    }
}
