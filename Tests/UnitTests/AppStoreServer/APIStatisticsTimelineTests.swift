import Foundation
import MockAppStore
import Testing

@testable import AppStoreServer

/// The client's per-endpoint, per-second counters (requests, 429s, retries) behind the report
/// page's request chart.
@Suite struct APIStatisticsTimelineTests {
    @Test func eventsAreCountedPerEndpointPerWallClockSecond() {
        let statistics = APIStatistics()
        let second = Date(timeIntervalSince1970: 1_800_000_000)
        statistics.record(.request, endpoint: .getNotificationHistory, at: second)
        statistics.record(.rateLimited, endpoint: .getNotificationHistory, at: second.addingTimeInterval(0.4))
        statistics.record(.request, endpoint: .getNotificationHistory, at: second.addingTimeInterval(1.2))
        statistics.record(.retry, endpoint: .getNotificationHistory, at: second.addingTimeInterval(1.2))
        statistics.record(.request, endpoint: .getTransactionHistory, at: second.addingTimeInterval(0.9))
        // Not per second: 5xx, transport errors, failed calls.
        statistics.record(.serverError, endpoint: .getTransactionHistory, at: second)
        let entries = statistics.timeline.entries
        #expect(
            entries == [
                .init(endpoint: "Get Notification History", second: 1_800_000_000, counts: .init(requests: 1, rateLimited: 1, retries: 0)),
                .init(endpoint: "Get Notification History", second: 1_800_000_001, counts: .init(requests: 1, rateLimited: 0, retries: 1)),
                .init(endpoint: "Get Transaction History", second: 1_800_000_000, counts: .init(requests: 1, rateLimited: 0, retries: 0)),
            ])
        #expect(statistics.snapshot.requests == 3)
        #expect(statistics.snapshot.serverErrors == 1)
    }

    @Test func sinceIsWhatWasCountedAfterAnEarlierTimeline() {
        let statistics = APIStatistics()
        let second = Date(timeIntervalSince1970: 1_800_000_000)
        statistics.record(.request, endpoint: .getNotificationHistory, at: second)
        let earlier = statistics.timeline
        statistics.record(.request, endpoint: .getNotificationHistory, at: second.addingTimeInterval(0.5))
        statistics.record(.request, endpoint: .getNotificationHistory, at: second.addingTimeInterval(3))
        #expect(
            statistics.timeline.since(earlier).entries == [
                .init(endpoint: "Get Notification History", second: 1_800_000_000, counts: .init(requests: 1)),
                .init(endpoint: "Get Notification History", second: 1_800_000_003, counts: .init(requests: 1)),
            ])
        #expect(statistics.timeline.since(statistics.timeline).entries.isEmpty)
    }

    @Test func memoryIsBoundedToTheNewestSeconds() {
        let statistics = APIStatistics(secondsKept: 100)
        let start = 1_800_000_000.0
        for offset in 0..<1000 {
            statistics.record(.request, endpoint: .getTransactionHistory, at: Date(timeIntervalSince1970: start + Double(offset)))
        }
        let seconds = statistics.timeline.entries.map(\.second)
        #expect(seconds.count <= 100)
        #expect(seconds.max() == 1_800_000_999)
        #expect(seconds.min()! >= 1_800_000_999 - 100)
        // The totals are not bounded by it.
        #expect(statistics.snapshot.requests == 1000)
    }

    /// Against the mock over HTTP with 2 requests a second and 8 requests sent at once: every
    /// request, 429 and retry the client counted is in the timeline, under its endpoint.
    @Test func theTimelineHoldsEveryRequest429AndRetryOfTheClient() async throws {
        try await MockAppStore.withRunning(.init(scenario: APIClientTests.scenario(customers: 30), rateLimitPerSecond: 2)) { mock, baseURL in
            let client = mock.client(baseURL: baseURL, requestsPerSecond: 40, retryPolicy: APIClientTests.fastRetries)
            #expect(client.requestsPerSecond[.getTransactionHistory] == 40)
            let ids = Array(Set(mock.sentNotifications.compactMap(\.notification.transaction?.transactionId)).sorted().prefix(8))
            // All at once, so the mock's 2 a second must refuse some however slow this machine is.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for id in ids { group.addTask { _ = try await client.getTransactionHistory(anyTransactionId: id, .init()) } }
                try await group.waitForAll()
            }
            let totals = client.statistics.timeline.totals, snapshot = client.statistics.snapshot
            #expect(snapshot.rateLimited > 0)
            #expect(totals.requests == snapshot.requests)
            #expect(totals.rateLimited == snapshot.rateLimited)
            #expect(totals.retries == snapshot.retries)
            #expect(totals.rateLimited == mock.statisticsSnapshot.rateLimited)
            #expect(Set(client.statistics.timeline.entries.map(\.endpoint)) == ["Get Transaction History"])
        }
    }
}
