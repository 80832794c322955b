import AppStoreServer
import Foundation
import PostgresNIO
import ReconcilerDomain
import TestSupport
import Testing

@testable import Reconciler
@testable import ReconcilerStore

/// The change feed in process against a real PostgreSQL: commit order, and ``ChangeFeedFollower``
/// handing on each change once, waking for new ones and naming a pruned position.
@Suite struct ChangeFeedTests: ChangeFeedTesting {
    let app: TestApp
    init() throws { app = try TestApp() }

    // MARK: Commit order

    /// A transaction that took a smaller id and commits later holds back the larger id already
    /// committed: a reader must not see a row an earlier one could still appear before.
    @Test func aCommittedChangeWaitsForAnEarlierTransactionStillRunning() async throws {
        try await TestDatabase.with { db in
            let handler = try app.handler(db)
            let early = try await handler.verify(signedPayload: try subscribed("order-1"))
            let late = try await handler.verify(signedPayload: try subscribed("order-2"))
            // As every recording path does: the headers first, committed, so the two transactions
            // below share no uncommitted row but the feed's.
            try await db.database.storeHeaders(of: early.signedParts + late.signedParts)
            try await db.client.withConnection { a in
                try await db.client.withConnection { b in
                    try await Self.execute("BEGIN", on: a)
                    _ = try await handler.apply([early], source: .webhook, on: DatabaseTransaction(a))
                    // Anything else the two transactions came to share would fail here, not hang the suite.
                    try await Self.execute("SET lock_timeout = '30s'", on: b)
                    try await Self.execute("BEGIN", on: b)
                    _ = try await handler.apply([late], source: .webhook, on: DatabaseTransaction(b))
                    try await Self.execute("COMMIT", on: b)
                    #expect(try await db.count("SELECT count(*) FROM purchase_changes") == 1)
                    #expect(try await Self.feed(db).isEmpty, "a change was readable while a smaller one could still commit")
                    try await Self.execute("COMMIT", on: a)
                }
            }
            // Other tests' transactions in the cluster may hold the feed back a moment longer.
            try await eventually("both changes readable") { try await Self.feed(db).count == 2 }
            let feed = try await Self.feed(db)
            #expect(feed.map(\.originalTransactionId) == ["order-1", "order-2"])
            #expect(feed[0].changeId < feed[1].changeId)
        }
    }

    // MARK: The follower, in process

    /// ``ChangeFeedFollower`` hands on each change once, in commit order, stops at its limit, and
    /// resumes after the last id it handed on.
    @Test func aFollowerHandsOnEachChangeOnceInOrderUpToItsLimit() async throws {
        try await TestDatabase.with { db in
            let handler = try app.handler(db)
            for original in ["follow-1", "follow-2", "follow-3"] {
                _ = try await handler.handle(signedPayload: try subscribed(original), source: .webhook)
            }
            try await eventually("three changes readable") { try await Self.feed(db).count == 3 }
            let collected = Locked<[PurchaseStore.FeedChange]>([])
            let first = ChangeFeedFollower(configuration: .init(limit: 2, batch: 1), database: db.database, logger: Self.logger)
            try await first.run { change in collected.withLock { $0.append(change) } }
            #expect(collected.withLock { $0.map(\.originalTransactionId) } == ["follow-1", "follow-2"])
            let resumed = ChangeFeedFollower(
                configuration: .init(since: collected.withLock { $0.last!.changeId }), database: db.database, logger: Self.logger)
            try await resumed.run { change in collected.withLock { $0.append(change) } }
            #expect(collected.withLock { $0.map(\.originalTransactionId) } == ["follow-1", "follow-2", "follow-3"])
        }
    }

    /// A following follower wakes for a change committed after it caught up; one whose position
    /// was pruned throws ``ReconcilerError/Code/feedPositionPruned`` naming that position.
    @Test func aFollowerWakesForANewChangeAndAPrunedPositionIsNamed() async throws {
        try await TestDatabase.with { db in
            let handler = try app.handler(db)
            _ = try await handler.handle(signedPayload: try subscribed("wake-1"), source: .webhook)
            try await eventually("the first change readable") { try await Self.feed(db).count == 1 }
            let delivered = Locked<[PurchaseStore.FeedChange]>([])
            let follower = ChangeFeedFollower(
                configuration: .init(follow: true, pollInterval: .seconds(1)), database: db.database, logger: Self.logger)
            let following = Task { try await follower.run { change in delivered.withLock { $0.append(change) } } }
            defer { following.cancel() }
            try await eventually("the first change handed on") { delivered.withLock { $0.count } == 1 }
            let first = try #require(delivered.withLock { $0.first })
            #expect(first.originalTransactionId == "wake-1")
            // LISTEN wakes it, or the poll once another test's transaction stops holding the change back.
            _ = try await handler.handle(signedPayload: try subscribed("wake-2"), source: .webhook)
            try await eventually("the new change handed on") { delivered.withLock { $0.count } == 2 }
            #expect(delivered.withLock { $0.map(\.originalTransactionId) } == ["wake-1", "wake-2"])
            following.cancel()
            // Cancelled while waiting or while reading: either way it ends, and nothing is asked of how.
            _ = await following.result

            // Prune all but the newest change: a follower from the first one's id was left behind.
            _ = try await Pruner(database: db.database).prune(.changes, before: Date(timeIntervalSinceNow: 3600))
            let behind = ChangeFeedFollower(configuration: .init(since: first.changeId), database: db.database, logger: Self.logger)
            let error = await #expect(throws: ReconcilerError.self) { try await behind.run { _ in } }
            #expect(error?.code == .feedPositionPruned)
            #expect(error?.description.hasPrefix("change \(first.changeId) is not in the feed") == true)
        }
    }

}
