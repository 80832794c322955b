import AppStoreServer
import Foundation
import ReconcilerDomain
import ReconcilerShared
import Testing

@testable import Reconciler
@testable import ReconcilerStore

/// The schedule's chain of windows, without a database: which windows an invocation retries, gives
/// up as lost, and the newest window it always recovers.
@Suite struct ScheduleChainTests {
    let hour = Duration.hours(1)
    let day = Duration.days(1)
    let now = Timestamp(millisecondsSince1970: 1_800_000_000_000)
    var retention: Duration { day * 180 }

    func run(_ id: Int64, _ start: Timestamp, _ end: Timestamp, _ status: RunRecord.Status) -> RunRecord {
        RunRecord(
            runId: id, kind: .scheduled, environment: .production, bundleId: "com.example", window: TimeWindow(start: start, end: end),
            dryRun: false,
            options: .init(), status: status, phase: .gapFill, startedAt: Date(), updatedAt: Date())
    }

    /// A window that stays partial is retried, and the newest window is recovered anyway.
    @Test func anUnfinishedWindowIsRetriedAndTheNewestRecoveredAnyway() {
        let stuck = run(1, now - hour * 5, now - hour * 3, .partial)
        let newest = run(2, now - hour * 4, now - hour * 2, .partial)
        let plan = ScheduleChain.plan(
            .init(unfinished: [stuck, newest], newestScheduled: newest, lastFinishedEnd: nil, newestLiveNotification: nil), overlap: hour,
            now: now, retention: retention)
        #expect(plan.retry.map(\.runId) == [1, 2])
        #expect(plan.lost.isEmpty)
        #expect(plan.next.start == now - hour * 3)
        #expect(plan.next.end == now)
        #expect(plan.origin == .previousScheduledWindow)
    }

    @Test func aWindowOutsideRetentionIsLostAndTheChainGoesOn() {
        let old = run(1, now - day * 200, now - day * 199, .interrupted)
        let plan = ScheduleChain.plan(
            .init(unfinished: [old], newestScheduled: old, lastFinishedEnd: nil, newestLiveNotification: nil), overlap: hour, now: now,
            retention: retention)
        #expect(plan.lost.map(\.runId) == [1])
        #expect(plan.retry.isEmpty)
        // The chain's next window would start before retention: it starts at its edge.
        #expect(plan.clippedToRetention)
        #expect(plan.next.start == now - retention + .seconds(60))
    }

    @Test func withoutAScheduledRunTheChainStartsFromTheLastFinishedRunOrTheNewestLiveNotification() {
        let fromRun = ScheduleChain.plan(
            .init(unfinished: [], newestScheduled: nil, lastFinishedEnd: now - hour * 2, newestLiveNotification: now - hour), overlap: hour,
            now: now, retention: retention)
        #expect(fromRun.next.start == now - hour * 3)
        #expect(fromRun.origin == .lastFinishedRun)
        let fromLive = ScheduleChain.plan(
            .init(unfinished: [], newestScheduled: nil, lastFinishedEnd: nil, newestLiveNotification: now - hour), overlap: hour, now: now,
            retention: retention)
        #expect(fromLive.next.start == now - hour * 2)
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
        let nearEdge = run(1, now - retention + day * 10, now - retention + day * 11, .partial)
        let recent = run(2, now - day * 5, now - day * 4, .partial)
        let plan = ScheduleChain.plan(
            .init(unfinished: [nearEdge, recent], newestScheduled: recent, lastFinishedEnd: nil, newestLiveNotification: nil), overlap: hour,
            now: now, retention: retention)
        #expect(plan.retry.map(\.runId) == [1, 2])
        #expect(plan.nearingRetentionEdge.map(\.runId) == [1])
        let sandbox = ScheduleChain.plan(
            .init(
                unfinished: [run(3, now - day * 28, now - day * 27, .partial)], newestScheduled: nil, lastFinishedEnd: nil,
                newestLiveNotification: nil),
            overlap: hour, now: now, retention: day * 30)
        #expect(sandbox.nearingRetentionEdge.map(\.runId) == [3])
    }
}
