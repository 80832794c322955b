import AppStoreServer
import Foundation
import MockAppStore
import TestSupport
import Testing

/// The API client's backoff on a manual clock, against the mock App Store over HTTP in this
/// process (no database, no child process): the retry goes out when the client's clock reaches
/// the backoff's end, and not before, however long that takes in real time.
@Suite(.timeLimit(.minutes(1))) struct ClockedAPIClientTests {
    /// A 500 (Apple's retryable 5000001) is retried after the first backoff: half of
    /// `initialBackoff` plus up to as much again at random (5 to 10 s here), on the clock.
    @Test func aRetryableErrorIsRetriedWhenTheClientsClockReachesTheBackoff() async throws {
        var faults = FaultConfiguration()
        faults.serverErrorRate = 0.5  // The first request gets the 500, the second not.
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let scenario = ScenarioConfiguration(seed: 3, customers: 5, now: now, outageStart: now - 6 * 3_600_000, outageEnd: now - 3 * 3_600_000)
        try await MockAppStore.withRunning(.init(scenario: scenario, faults: faults)) { mock, baseURL in
            let clock = ManualClock()
            var configuration = mock.client(baseURL: baseURL, retryPolicy: .init(initialBackoff: .seconds(10))).configuration
            configuration.clock = clock
            configuration.requestsPerSecond = [:]  // No turns to wait for: the only wait is the backoff.
            let client = AppStoreServerAPIClient(configuration: configuration)
            let subscription = mock.sentNotifications.first { $0.notification.transaction?.type == .autoRenewableSubscription }
            let id = try #require(subscription?.notification.transaction?.transactionId)
            let call = Task { try await client.getAllSubscriptionStatuses(anyTransactionId: id) }

            await clock.waitForSleepers(1)
            let backoff = try #require(clock.nextDeadline)
            #expect(backoff >= .seconds(5) && backoff <= .seconds(10))
            #expect(mock.statisticsSnapshot.requests["Get All Subscription Statuses"] == 1)
            clock.advance(to: backoff - .nanoseconds(1))
            #expect(clock.sleepers == 1, "retried before the backoff ended")
            clock.advance(to: backoff)
            _ = try await call.value
            #expect(mock.statisticsSnapshot.requests["Get All Subscription Statuses"] == 2)
            #expect(mock.statisticsSnapshot.injectedServerErrors == 1)
            #expect(client.statistics.snapshot.retries == 1)
        }
    }
}
