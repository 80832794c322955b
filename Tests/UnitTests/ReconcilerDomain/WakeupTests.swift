import ReconcilerDomain
import Testing

@testable import Reconciler

/// Idle workers wait on a ``Wakeup`` thousands of times a minute in a long run: a wait, however it
/// ends, leaves nothing behind (a million-notification run grew by 40 MiB when each wait woken by
/// `notify()` left an id behind).
@Suite(.timeLimit(.minutes(1))) struct WakeupTests {
    @Test func waitsLeaveNothingBehindHoweverTheyEnd() async throws {
        let wakeup = Wakeup()
        for _ in 0..<200 {
            let waiter = Task { await wakeup.wait(upTo: .seconds(60)) }
            while wakeup.retained.waiters == 0 { await Task.yield() }
            wakeup.notify()
            await waiter.value
        }
        // Ended by their time, and by cancellation.
        await wakeup.wait(upTo: .milliseconds(1))
        let cancelled = Task { await wakeup.wait(upTo: .seconds(60)) }
        cancelled.cancel()
        await cancelled.value
        // Long enough for the timers the notified waits cancelled to have run.
        await wakeup.wait(upTo: .milliseconds(200))
        let retained = wakeup.retained
        #expect(retained.active == 0 && retained.over == 0 && retained.waiters == 0, "\(retained)")
    }
}
