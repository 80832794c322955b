import AppStoreServer
import Foundation
import Logging
import ReconcilerDomain
import TestSupport
import Testing

@testable import ReconcilerStore

/// How this process judges its run lease on a manual clock: no database, no waiting. Renewals go
/// through a closure standing in for the database; time moves only when the test moves it. (Code
/// that ignored its clock would sleep on real time and never reach the waits the test moves past.)
/// The forwarder's delivery leases: Forwarder/ClockedDeliveryLeaseTests.
@Suite(.timeLimit(.minutes(1))) struct ClockedLeaseTests {
    struct DatabaseAway: Error {}

    /// The renewal loop logs each failure; the tests need no log.
    static let logger = Logger(label: "clocked-lease-tests", factory: { _ in SwiftLogNoOpLogHandler() })

    /// The run lease's rule: a holder whose renewals fail gives the run up one renewal interval
    /// before its lease could run out, not a moment earlier.
    @Test func aRunLeaseIsGivenUpOneRenewalIntervalBeforeItCouldRunOut() {
        let configuration = RunLease.Configuration(duration: .seconds(30), renewalInterval: .seconds(5))
        #expect(!configuration.mustStop(renewedAt: .seconds(10), now: .seconds(35) - .nanoseconds(1)))
        #expect(configuration.mustStop(renewedAt: .seconds(10), now: .seconds(35)))
    }

    /// Renewals every 5 s of the clock all fail: the holder keeps the run while its 30-second
    /// lease could not yet run out within another interval (failures at 5, 10, 15 and 20 s),
    /// and stops with ``ReconcilerError/Code/leaseLost`` at the failure 25 s after the lease was taken.
    @Test func aRunLeaseNotRenewedWithinItsDurationIsLost() async throws {
        let clock = ManualClock()
        let configuration = RunLease.Configuration(duration: .seconds(30), renewalInterval: .seconds(5), clock: clock)
        let renewals = Locked<[Duration]>([])
        let keeping = Task {
            try await RunLease.keepRenewed(configuration: configuration, logger: Self.logger) {
                renewals.withLock { $0.append(clock.now) }
                throw DatabaseAway()
            }
        }
        for _ in 1...4 {
            await clock.waitForSleepers(1)
            clock.advance(by: .seconds(5))
        }
        // Still holding after the fourth failure: it sleeps until the next renewal.
        await clock.waitForSleepers(1)
        #expect(clock.deadlines == [.seconds(25)])
        clock.advance(by: .seconds(5))
        let lost = await #expect(throws: ReconcilerError.self) { try await keeping.value }
        #expect(lost?.code == .leaseLost)
        #expect(renewals.withLock { $0 } == [.seconds(5), .seconds(10), .seconds(15), .seconds(20), .seconds(25)])
    }

    /// A renewal that succeeds starts the count again: failing from then on, the holder stops
    /// 25 s after that renewal, not after the lease was first taken.
    @Test func aSuccessfulRenewalPushesTheRunLeasesEndBack() async throws {
        let clock = ManualClock()
        let configuration = RunLease.Configuration(duration: .seconds(30), renewalInterval: .seconds(5), clock: clock)
        let keeping = Task {
            try await RunLease.keepRenewed(configuration: configuration, logger: Self.logger) {
                guard clock.now == .seconds(10) else { throw DatabaseAway() }
                return true
            }
        }
        for _ in 1...6 {
            await clock.waitForSleepers(1)
            clock.advance(by: .seconds(5))
        }
        await clock.waitForSleepers(1)
        #expect(clock.deadlines == [.seconds(35)], "gave the run up before 35 s")
        clock.advance(by: .seconds(5))
        let lost = await #expect(throws: ReconcilerError.self) { try await keeping.value }
        #expect(lost?.code == .leaseLost)
        #expect(clock.now == .seconds(35))
    }

    /// A renewal the database refuses (another process holds the lease) stops the holder at once.
    @Test func aRunLeaseTakenOverIsLostAtTheNextRenewal() async throws {
        let clock = ManualClock()
        let configuration = RunLease.Configuration(duration: .seconds(30), renewalInterval: .seconds(5), clock: clock)
        let keeping = Task { try await RunLease.keepRenewed(configuration: configuration, logger: Self.logger) { false } }
        await clock.waitForSleepers(1)
        #expect(clock.deadlines == [.seconds(5)])
        clock.advance(by: .seconds(5))
        let lost = await #expect(throws: ReconcilerError.self) { try await keeping.value }
        #expect(lost?.code == .leaseLost)
    }
}
