import Foundation
import MockAppStore
import PostgresNIO
import ReconcilerDomain
import TestSupport
import Testing

@testable import Reconciler

/// Where a dense shard is cut, and what an empty query costs. Real
/// processes (`mock-appstore`, `reconciler run`), PostgreSQL, the mock over HTTP; every expectation
/// is judged against what the mock itself lists and counts.
@Suite(.serialized) struct ShardCutTests {
    static let hour: Int64 = 3_600_000

    /// Apple documents neither the date Get Notification History's window selects on nor the order
    /// of its pages. With the mock selecting and ordering by `signedDate` (each first send attempt 0
    /// to 2 s after it), a run whose shards split still records every notification of a dense hour:
    /// a piece that started at the first send attempt of the page's last item would miss those
    /// signed between that item's signing and its first send attempt.
    @Test func shardsThatSplitRecordEveryNotificationOfADenseHourWhenHistoryFollowsSignedDate() async throws {
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let end = now - Self.hour, start = end - Self.hour
        // A page per notification: every page is in first-attempt order on its own, so the code
        // before the fix split these shards often (and lost about 10 notifications at their cuts).
        try await HistoryMock.with([
            "--seed", "41", "--scale-notifications", "1200", "--outage-start", "\(start)", "--outage-end", "\(end)",
            "--renewal-period", "5m", "--history-date", "signed-date", "--page-size", "1", "--rate-limit", "0",
        ]) { mock in
            // Only the sweep holds data (no TEST notification in the scenario), so nothing it misses is
            // found by a typed query instead; sixteen workers for it make it split again and again.
            let run = try await mock.reconciler(
                [
                    "run", "--start", "\(start)", "--end", "\(end)", "--priority", "TEST", "--concurrency", "16", "--gap-concurrency", "2",
                    "--max-connections", "40",
                ],
                environment: ["APP_STORE_RATE_LIMIT": "1000"])
            #expect(run.status == 0, "\(run.stdout)\n\(run.stderr)")
            #expect(try await mock.db.count("SELECT count(*) FROM run_shards WHERE split_at_ms IS NOT NULL") > 0, "no shard split")
            // The mock's own list of the window: signedDate is what it selects on in this mode.
            let expected = try await mock.notifications().filter { $0.signedDate >= start && $0.signedDate < end }
            #expect(expected.count >= 1200)
            let recorded = Set(try await mock.db.strings("SELECT notification_uuid FROM notifications"))
            let missing = expected.filter { !recorded.contains($0.notificationUUID) }
            #expect(
                missing.count == 0,
                "\(missing.count) of \(expected.count) notifications never replayed, e.g. \(missing.prefix(3).map { "\($0.kind) signed \($0.signedDate)" })"
            )
        }
    }

    /// Each typed query starts as one shard, so a query with nothing in a 9-day window costs one
    /// request, counted by the mock per query.
    @Test func anEmptyTypedQueryOverNineDaysCostsOneRequest() async throws {
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let end = now - Self.hour, start = end - 9 * 24 * Self.hour
        // No rate limit at the mock: a 429 would be a second request for the same page.
        try await HistoryMock.with([
            "--seed", "43", "--customers", "12", "--span", "10d", "--no-outage", "--no-scripted-customers", "--rate-limit", "0",
        ]) { mock in
            let run = try await mock.reconciler(["run", "--start", "\(start)", "--end", "\(end)"], environment: ["APP_STORE_RATE_LIMIT": "1000"])
            #expect(run.status == 0, "\(run.stdout)\n\(run.stderr)")
            // Empty by the mock's list, a minute of slack on each side of the window.
            let near = try await mock.notifications().filter { $0.firstAttemptDate >= start - 60_000 && $0.firstAttemptDate < end + 60_000 }
            let empty = ReplayPlanner.defaultPriority.map(\.description).filter { kind in !near.contains { $0.kind == kind } }
            try #require(!empty.isEmpty, "the scenario must leave a typed query empty")
            let requests = try await mock.historyRequestsByFilter()
            for kind in empty {
                #expect(requests[kind] == 1, "\(kind) found nothing in 9 days and cost \(requests[kind] ?? 0) requests")
            }
        }
    }
}
