import AppStoreServer
import ReconcilerDomain
import ReconcilerShared
import Testing

@testable import Reconciler
@testable import ReconcilerStore

@Suite struct ReplayPlannerTests {
    @Test func urgentQueriesComeFirstAndTheSweepLast() {
        let shards = ReplayPlanner().plan(TimeWindow(milliseconds: 1_000_000..<1_000_000 + 3 * 3_600_000))
        let queries = shards.reduce(into: [NotificationFilter]()) { if $0.last != $1.filter { $0.append($1.filter) } }
        #expect(
            queries.prefix(8).map(\.description) == [
                "CONSUMPTION_REQUEST", "DID_RENEW", "DID_RENEW/BILLING_RECOVERY", "EXPIRED/VOLUNTARY", "EXPIRED/BILLING_RETRY",
                "EXPIRED/PRICE_INCREASE",
                "EXPIRED/PRODUCT_NOT_FOR_SALE", "EXPIRED",
            ])
        #expect(queries.contains(.init(.refund)))
        #expect(queries.contains(.init(.revoke)))
        #expect(queries.contains(.init(.gracePeriodExpired)))
        #expect(queries.contains(.init(.didFailToRenew)))
        #expect(queries.contains(.init(.didFailToRenew, .gracePeriod)))
        #expect(queries.last == .everything)
        #expect(queries.filter { $0 == .everything }.count == 1)
        #expect(shards.map(\.queryIndex) == shards.map(\.queryIndex).sorted())
    }

    @Test func everyQuerysShardsCoverTheWholeWindowWithOverlap() {
        let start: Int64 = 1_700_000_000_000, end = start + 5 * 3_600_000 + 17
        let planner = ReplayPlanner(configuration: .init(priority: [.init(.didRenew)], shardDuration: 45 * 60_000, maximumShardsPerQuery: 48))
        let shards = planner.plan(TimeWindow(milliseconds: start..<end))
        for query in Set(shards.map(\.queryIndex)) {
            let own = shards.filter { $0.queryIndex == query }.sorted { $0.start < $1.start }
            #expect(own.count == 7)
            #expect(own.first!.start < start)
            #expect(own.last!.end > end)
            for (left, right) in zip(own, own.dropFirst()) {
                #expect(right.start < left.end - 1, "shards must overlap so a boundary notification is in both")
            }
            #expect(own.allSatisfy { $0.request.startDate < $0.request.endDate })
        }
        #expect(
            ReplayPlanner(configuration: .init(shardDuration: 60_000, maximumShardsPerQuery: 4)).plan(TimeWindow(milliseconds: start..<end))
                .filter { $0.queryIndex == 0 }.count == 4)
    }

    /// Apple wants an answer to a consumption request within 12 hours of its first send attempt:
    /// by default a run queries them before everything else; `--priority` can change that.
    @Test func consumptionRequestsAreQueriedFirst() {
        let shards = ReplayPlanner().plan(TimeWindow(milliseconds: 1_700_000_000_000..<1_700_003_600_000))
        #expect(shards.first?.filter == NotificationFilter(.consumptionRequest))
        #expect(shards.first?.queryIndex == 0)
        #expect(shards.last?.filter == .everything)
        let renewalsFirst = ReplayPlanner(configuration: .init(priority: [.init(.didRenew), .init(.consumptionRequest)]))
            .plan(TimeWindow(milliseconds: 1_700_000_000_000..<1_700_003_600_000))
        #expect(renewalsFirst.map(\.filter) == [.init(.didRenew), .init(.consumptionRequest), .everything])
    }

    /// Without `--shard-duration`, every query is one shard over the whole window, however long.
    @Test func eachQueryStartsAsOneShardOverTheWholeWindow() {
        let start: Int64 = 1_700_000_000_000, end = start + 9 * 86_400_000
        let shards = ReplayPlanner().plan(TimeWindow(milliseconds: start..<end))
        #expect(shards.count == ReplayPlanner.defaultPriority.count + 1)
        #expect(Set(shards.map(\.queryIndex)).count == shards.count)
        #expect(shards.allSatisfy { $0.start == start - 1 && $0.end == end + 1 })
    }

    /// A split's pieces start the margin before the cut (Apple may select on the first send
    /// attempt or on signedDate), reach the shard's end, and overlap each other.
    @Test func piecesStartTheSplitMarginBeforeTheCut() {
        let shard = ReplayPlanner.Shard(queryIndex: 12, filter: .everything, start: 999, end: 1_000_000 + 3_600_001)
        let cut: Int64 = 1_000_000 + 600_000
        let pieces = ReplayPlanner().pieces(of: shard, from: cut, count: 4)
        #expect(pieces.count == 4)
        #expect(pieces.first!.start < cut - ReplayPlanner.splitMargin)
        #expect(pieces.first!.start >= cut - ReplayPlanner.splitMargin - 1)
        #expect(pieces.last!.end == shard.end)
        for (left, right) in zip(pieces, pieces.dropFirst()) { #expect(right.start < left.end - 1) }
        #expect(pieces.allSatisfy { $0.filter == .everything && $0.queryIndex == 12 })
        // A cut within the margin of the shard's start: the pieces start where the shard does.
        #expect(ReplayPlanner().pieces(of: shard, from: 5_000, count: 2).first!.start == shard.start)
    }

    @Test func filtersParseOnlyWhatAppleDocuments() {
        #expect(NotificationFilter(parsing: "DID_RENEW/BILLING_RECOVERY") == .init(.didRenew, .billingRecovery))
        #expect(NotificationFilter(parsing: "expired") == .init(.expired))
        #expect(NotificationFilter(parsing: "DID_RENEW/NOPE") == nil)
        #expect(NotificationFilter(parsing: "") == nil)
        #expect(NotificationFilter(parsing: "A/B/C") == nil)
    }
}

/// The replay's shard queue: how its workers end.
@Suite struct ShardQueueTests {
    static func records(_ count: Int) -> [ShardRecord] {
        ReplayPlanner().plan(TimeWindow(milliseconds: 1_000_000..<1_000_000 + 3 * 3_600_000)).prefix(count).map {
            ShardRecord(shard: $0, paginationToken: nil, pagesDone: 0, notificationsSeen: 0, restarts: 0, status: .pending)
        }
    }

    /// A worker that failed never reports its shard finished; once the queue is closed, a worker
    /// that finishes its own shard afterwards gets no more work instead of waiting forever.
    @Test func aClosedQueueEndsEveryLaterWorker() async {
        let queue = ShardQueue(Self.records(3))
        let failing = await queue.next(), finishing = await queue.next()
        #expect(failing != nil && finishing != nil)
        await queue.close()
        await queue.finished()
        #expect(await queue.next() == nil)
    }

    /// A worker waiting for a split's pieces stops waiting when its task is cancelled.
    @Test func aWaitingWorkerEndsWhenCancelled() async {
        let queue = ShardQueue(Self.records(1))
        #expect(await queue.next() != nil)
        let waiter = Task { await queue.next() }
        waiter.cancel()
        #expect(await waiter.value == nil)
        // The shard in progress can still split: its pieces are not lost.
        await queue.add(Self.records(1))
        #expect(await queue.next() != nil)
    }
}
