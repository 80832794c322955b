import AppStoreServer
import Foundation
import ReconcilerShared
import Testing

@testable import Reconciler
@testable import ReconcilerStore

/// The schedule's chain of windows, without a database: which windows an invocation retries, gives
/// up as lost, and the newest window it always recovers.
@Suite struct ScheduleChainTests {
    let hour: Int64 = 3_600_000
    let day: Int64 = 86_400_000
    let now: Int64 = 1_800_000_000_000
    var retention: Int64 { 180 * day }

    func run(_ id: Int64, _ start: Int64, _ end: Int64, _ status: RunRecord.Status) -> RunRecord {
        RunRecord(
            runId: id, kind: .scheduled, environment: "Production", bundleId: "com.example", windowStart: start, windowEnd: end, dryRun: false,
            options: .init(), status: status, phase: .gapFill, startedAt: Date(), updatedAt: Date())
    }

    /// A window that stays partial is retried, and the newest window is recovered anyway.
    @Test func anUnfinishedWindowIsRetriedAndTheNewestRecoveredAnyway() {
        let stuck = run(1, now - 5 * hour, now - 3 * hour, .partial)
        let newest = run(2, now - 4 * hour, now - 2 * hour, .partial)
        let plan = ScheduleChain.plan(
            .init(unfinished: [stuck, newest], newestScheduled: newest, lastFinishedEnd: nil, newestLiveNotification: nil), overlap: hour,
            now: now, retention: retention)
        #expect(plan.retry.map(\.runId) == [1, 2])
        #expect(plan.lost.isEmpty)
        #expect(plan.next.start == now - 3 * hour)
        #expect(plan.next.end == now)
        #expect(plan.origin == .previousScheduledWindow)
    }

    @Test func aWindowOutsideRetentionIsLostAndTheChainGoesOn() {
        let old = run(1, now - 200 * day, now - 199 * day, .interrupted)
        let plan = ScheduleChain.plan(
            .init(unfinished: [old], newestScheduled: old, lastFinishedEnd: nil, newestLiveNotification: nil), overlap: hour, now: now,
            retention: retention)
        #expect(plan.lost.map(\.runId) == [1])
        #expect(plan.retry.isEmpty)
        // The chain's next window would start before retention: it starts at its edge.
        #expect(plan.clippedToRetention)
        #expect(plan.next.start == now - retention + 60_000)
    }

    @Test func withoutAScheduledRunTheChainStartsFromTheLastFinishedRunOrTheNewestLiveNotification() {
        let fromRun = ScheduleChain.plan(
            .init(unfinished: [], newestScheduled: nil, lastFinishedEnd: now - 2 * hour, newestLiveNotification: now - hour), overlap: hour,
            now: now, retention: retention)
        #expect(fromRun.next.start == now - 3 * hour)
        #expect(fromRun.origin == .lastFinishedRun)
        let fromLive = ScheduleChain.plan(
            .init(unfinished: [], newestScheduled: nil, lastFinishedEnd: nil, newestLiveNotification: now - hour), overlap: hour, now: now,
            retention: retention)
        #expect(fromLive.next.start == now - 2 * hour)
        #expect(fromLive.origin == .newestLiveNotification)
        let nothing = ScheduleChain.plan(
            .init(unfinished: [], newestScheduled: nil, lastFinishedEnd: nil, newestLiveNotification: nil), overlap: hour, now: now,
            retention: retention)
        // A new app or a sandbox without traffic: the first window is the overlap before now, not an error.
        #expect(nothing.next == TimeWindow(start: now - hour, end: now))
        #expect(nothing.origin == .firstWindow)
    }

    /// N failures in a row give up; a permanent failure (Apple refused it, 5000000 among them) at once.
    @Test func aFailureGivesUpAfterTheConfiguredAttemptsOrAtOnceWhenPermanent() {
        let policy = GiveUpPolicy(attempts: 3)
        #expect(!policy.givesUp(.retryable, consecutiveFailures: 2))
        #expect(policy.givesUp(.retryable, consecutiveFailures: 3))
        #expect(policy.givesUp(.permanent, consecutiveFailures: 1))
        #expect(GiveUpPolicy(attempts: 0).attempts == 1)
        let generalInternal = AppStoreServerAPIError.serverError(
            .init(endpoint: .getTransactionHistory, httpStatusCode: 500, errorCode: .generalInternal, attempts: 1))
        let retryable = AppStoreServerAPIError.serverError(
            .init(endpoint: .getTransactionHistory, httpStatusCode: 500, errorCode: .generalInternalRetryable, attempts: 5))
        #expect(generalInternal.failureKind == .permanent)
        #expect(retryable.failureKind == .retryable)
    }

    /// An unfinished window in the last tenth of retention is warned about before it is lost.
    @Test func anUnfinishedWindowNearTheRetentionEdgeIsNamedBeforeItIsLost() {
        let nearEdge = run(1, now - retention + 10 * day, now - retention + 11 * day, .partial)
        let recent = run(2, now - 5 * day, now - 4 * day, .partial)
        let plan = ScheduleChain.plan(
            .init(unfinished: [nearEdge, recent], newestScheduled: recent, lastFinishedEnd: nil, newestLiveNotification: nil), overlap: hour,
            now: now, retention: retention)
        #expect(plan.retry.map(\.runId) == [1, 2])
        #expect(plan.nearingRetentionEdge.map(\.runId) == [1])
        let sandbox = ScheduleChain.plan(
            .init(
                unfinished: [run(3, now - 28 * day, now - 27 * day, .partial)], newestScheduled: nil, lastFinishedEnd: nil,
                newestLiveNotification: nil),
            overlap: hour, now: now, retention: 30 * day)
        #expect(sandbox.nearingRetentionEdge.map(\.runId) == [3])
    }
}
