import AppStoreServer
import Foundation
import TestSupport
import Testing

@testable import Forwarder

/// How the forwarder judges its delivery leases on a manual clock: no database, no waiting; time
/// moves only when the test moves it. (The run lease: ReconcilerStore/ClockedLeaseTests.)
@Suite(.timeLimit(.minutes(1))) struct ClockedDeliveryLeaseTests {
    /// A delivery's request stops a quarter of the lease before the lease could run out by the
    /// clock (8 s lease, taken at 0 s: at 6 s), not a moment earlier.
    @Test func aDeliveryLeaseNotRenewedStopsItsRequestAQuarterBeforeItCouldRunOut() async {
        let clock = ManualClock()
        let (leases, token) = (DeliveryLeases(), UUID())
        await leases.add(token, validUntil: clock.now + .seconds(8))
        let watching = Task {
            await leases.waitUntilUncertain(token, margin: .seconds(2), clock: clock)
            return clock.now
        }
        // The watch wakes every half margin (1 s) until the cutoff.
        for second in 1...5 {
            await clock.waitForSleepers(1)
            #expect(clock.deadlines == [.seconds(second)])
            clock.advance(by: .seconds(1))
        }
        await clock.waitForSleepers(1)
        clock.advance(by: .seconds(1) - .nanoseconds(1))
        #expect(clock.sleepers == 1, "stopped before the cutoff")
        clock.advance(by: .nanoseconds(1))
        #expect(await watching.value == .seconds(6))
    }

    /// A renewal moves the cutoff on (renewed at 4 s: valid until 12 s, so the request goes on
    /// past 6 s); a renewal the database refuses stops the request at its next wake, half the
    /// margin later (lost at 7 s: stopped at 8 s, before the cutoff at 10 s).
    @Test func aDeliveryLeaseRenewedKeepsItsRequestAndOneLostStopsIt() async {
        let clock = ManualClock()
        let (leases, token) = (DeliveryLeases(), UUID())
        await leases.add(token, validUntil: .seconds(8))
        let watching = Task {
            await leases.waitUntilUncertain(token, margin: .seconds(2), clock: clock)
            return clock.now
        }
        await clock.waitForSleepers(1)
        clock.advance(to: .seconds(4))
        await leases.renewed([token], held: [token], validUntil: .seconds(12))
        for second in 5...7 {
            await clock.waitForSleepers(1)
            clock.advance(to: .seconds(second))
        }
        await clock.waitForSleepers(1)
        #expect(clock.deadlines == [.seconds(8)], "the renewal did not move the cutoff on")
        await leases.renewed([token], held: [], validUntil: .seconds(13))
        clock.advance(to: .seconds(8))
        #expect(await watching.value == .seconds(8))
    }
}
