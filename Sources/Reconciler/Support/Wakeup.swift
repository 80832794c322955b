import Synchronization

/// Lets tasks that ran out of work wait for more: ``wait(upTo:)`` returns when ``notify()`` is
/// called, when the time passes, or when the task is cancelled, whichever comes first.
final class Wakeup: Sendable {
    private struct State {
        var nextId = 0
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
        /// Waits whose time passed (or were cancelled) before they began to wait.
        var over: Set<Int> = []
    }

    private let state = Mutex(State())

    /// Wakes every task waiting now.
    func notify() {
        let waiters = state.withLock { state in
            defer { state.waiters.removeAll() }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    func wait(upTo timeout: Duration) async {
        let id = state.withLock { state in
            defer { state.nextId += 1 }
            return state.nextId
        }
        let timer = Task { [weak self] in
            try? await Task.sleep(for: timeout)
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
        state.withLock { _ = $0.over.remove(id) }
    }

    private func resume(_ id: Int) {
        let waiter = state.withLock { state in
            guard let waiter = state.waiters.removeValue(forKey: id) else {
                state.over.insert(id)
                return nil as CheckedContinuation<Void, Never>?
            }
            return waiter
        }
        waiter?.resume()
    }
}
