import Foundation
import Synchronization
import UnixSignals

/// SIGINT or SIGTERM arrived and the work stopped.
struct Interrupted: Error {}

/// Runs `body`; SIGINT or SIGTERM cancels it (committed checkpoints stay, the rest rolls back).
/// Errors `body` throws while stopping are passed on (a run's carries what it recorded); a bare
/// cancellation becomes ``Interrupted``.
///
/// Whatever `body` waits on, the process ends within `stopTimeout` of the signal: if it has not
/// stopped by then, or a second signal arrives, the process exits with status 2 at once. That
/// loses nothing a killed run would not: every checkpoint is committed with its page.
func cancellingOnSignals<Result: Sendable>(
    stopTimeout: Duration = .seconds(10), _ body: @escaping @Sendable () async throws -> Result
) async throws -> Result {
    let work = Task { try await body() }
    let signalled = Atomic<Bool>(false)
    let watcher = Task.detached {
        var signals = await UnixSignalsSequence(trapping: .sigint, .sigterm).makeAsyncIterator()
        guard await signals.next() != nil, !Task.isCancelled else { return }
        signalled.store(true, ordering: .relaxed)
        work.cancel()
        Task.detached {
            try await Task.sleep(for: stopTimeout)
            forceExit("it did not stop within \(stopTimeout.components.seconds) s of the signal")
        }
        if await signals.next() != nil, !Task.isCancelled { forceExit("a second signal arrived") }
    }
    defer { watcher.cancel() }
    do {
        return try await withTaskCancellationHandler { try await work.value } onCancel: { work.cancel() }
    } catch is CancellationError where signalled.load(ordering: .relaxed) {
        throw Interrupted()
    }
}

private func forceExit(_ why: String) -> Never {
    FileHandle.standardError.write(Data("stopping now: \(why); rerun the same command to resume from the last checkpoint\n".utf8))
    exit(2)
}
