import Synchronization
import TestSupport
import Testing

@testable import ReconcilerStore

/// The one watchdog that gives up on database attempts past their deadline: an attempt left running
/// is expired once, an attempt that ended is not, and nothing stays watched after either.
@Suite struct AttemptWatchdogTests {
    @Test func anAttemptPastItsDeadlineIsExpiredOnceAndOneThatEndedIsNot() async throws {
        let watchdog = AttemptWatchdog()
        let expired = Mutex<[String]>([])
        let ended = watchdog.watch(timeout: .milliseconds(20)) { expired.withLock { $0.append("ended") } }
        watchdog.unwatch(ended)
        _ = watchdog.watch(timeout: .milliseconds(20)) { expired.withLock { $0.append("left running") } }
        try await eventually("the attempt left running expired") { expired.withLock { !$0.isEmpty } && watchdog.watchedCount == 0 }
        // Another attempt after the first loop ended is watched by a new one, to its own end.
        _ = watchdog.watch(timeout: .milliseconds(20)) { expired.withLock { $0.append("later") } }
        try await eventually("the later attempt expired") { expired.withLock { $0.count == 2 } }
        #expect(expired.withLock { $0 } == ["left running", "later"])
        #expect(watchdog.watchedCount == 0)
    }
}
