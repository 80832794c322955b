import AppStoreServer
import ReconcilerDomain
import TestSupport
import Testing

@testable import Forwarder
@testable import ReconcilerStore

/// The forwarder's pacing on a manual clock, and its retry schedule: no database, no waiting.
@Suite(.timeLimit(.minutes(1))) struct ClockedForwardingTests {
    /// Five deliveries ready at once under `requestsPerSecond: 4` start a quarter second apart
    /// by the clock, the first at once. (A pacer that ignored its clock would start them all at
    /// the manual clock's start.)
    @Test func deliveriesStartNoFasterThanTheirRate() async {
        let clock = ManualClock()
        let pacer = Pacer(perSecond: 4, clock: clock)
        let starts = Locked<[Duration]>([])
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<5 {
                group.addTask {
                    await pacer.waitForTurn()
                    starts.withLock { $0.append(clock.now) }
                }
            }
            while true {
                // Settled: each delivery started or asleep until its turn.
                while starts.withLock({ $0.count }) + clock.sleepers < 5 { await Task.yield() }
                guard let next = clock.nextDeadline else { break }
                clock.advance(to: next)
            }
        }
        #expect(starts.withLock { $0 }.sorted() == (0..<5).map { .milliseconds(250 * $0) })
    }

    /// A pacer keeps the rate across a pause: a turn asked for long after the last one is given
    /// at once, the next one a turn later.
    @Test func aTurnAfterAPauseIsGivenAtOnce() async {
        let clock = ManualClock()
        let pacer = Pacer(perSecond: 4, clock: clock)
        await pacer.waitForTurn()
        clock.advance(by: .seconds(10))
        await pacer.waitForTurn()
        let next = Task { await pacer.waitForTurn() }
        await clock.waitForSleepers(1)
        #expect(clock.deadlines == [.seconds(10) + .milliseconds(250)])
        clock.advance(by: .milliseconds(250))
        await next.value
    }

    /// The documented retry schedule: the first retry after `initialBackoff`, each later one
    /// after twice the one before, at most `maximumBackoff` (5 s, 10 s, 20 s, … an hour). The
    /// wait itself is the queue's `next_attempt_at`, judged by the database's clock.
    @Test func retriesBackOffOnTheDocumentedSchedule() {
        let configuration = Forwarder.Configuration(url: ForwardingURL("http://app.invalid/apple"))
        let schedule = (1...13).map { configuration.backoff(afterAttempt: $0) }
        #expect(schedule == [5, 10, 20, 40, 80, 160, 320, 640, 1280, 2560, 3600, 3600, 3600].map { .seconds($0) })
        let short = Forwarder.Configuration(
            url: ForwardingURL("http://app.invalid/apple"), initialBackoff: .milliseconds(50), maximumBackoff: .seconds(1))
        #expect((1...7).map { short.backoff(afterAttempt: $0) } == [50, 100, 200, 400, 800, 1000, 1000].map { .milliseconds($0) })
    }
}
