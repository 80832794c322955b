package import AppStoreServer
import Foundation
package import Logging
import ReconcilerDomain
package import ReconcilerStore
import Synchronization

/// Reads the change feed from a change id in commit order, in batches, handing each change on as
/// soon as it is read; with `follow`, waits for more (LISTEN on ``PurchaseStore/changeChannel`` and
/// a poll) and rides out a database outage of any length.
///
/// A follower that finds its position gone from the feed (at start, or later when a prune removed
/// rows it had not read yet) throws ``ReconcilerError/Code/feedPositionPruned``: its consumer may have missed changes and
/// must resync. Cancelling the task ends it between two changes, never inside one.
///
/// ```swift
/// let follower = ChangeFeedFollower(
///     configuration: .init(since: lastProcessedId, follow: true), database: database, logger: logger)
/// try await follower.run { change in
///     if let after = change.after { try apply(after) }
/// }
/// ```
package struct ChangeFeedFollower: Sendable {
    package struct Configuration: Sendable {
        /// Read the changes after this id (0: from the oldest change kept).
        package var since: Int64
        /// After catching up, wait for new changes instead of returning.
        package var follow: Bool
        /// Return after this many changes.
        package var limit: Int?
        /// Changes read per query.
        package var batch: Int
        /// With `follow`, read this often without a notification too: a change held back by an
        /// older transaction becomes readable without one.
        package var pollInterval: Duration
        /// Only these apps and environments' changes (`nil`: every one's).
        package var apps: [AppTarget]?
        /// Only changes of purchases of this app user (lowercased UUID), before or after the change.
        package var appAccountToken: String?
        /// Only changes made by this run.
        package var runId: Int64?
        /// Only rows of this kind (`nil`: both).
        package var kind: PurchaseStore.FeedKind?
        /// Only changes of purchases of this app user (the app's own ID, `appUserId`), before or after the change.
        package var appUserId: String?

        package init(
            since: Int64 = 0, follow: Bool = false, limit: Int? = nil, batch: Int = 500, pollInterval: Duration = .seconds(5),
            apps: [AppTarget]? = nil, appAccountToken: String? = nil, runId: Int64? = nil, kind: PurchaseStore.FeedKind? = nil,
            appUserId: String? = nil
        ) {
            self.since = since
            self.follow = follow
            self.limit = limit
            self.batch = batch
            self.pollInterval = pollInterval
            self.apps = apps
            self.appAccountToken = appAccountToken
            self.runId = runId
            self.kind = kind
            self.appUserId = appUserId
        }
    }

    package let configuration: Configuration
    private let database: Database
    private let logger: Logger

    package init(configuration: Configuration, database: Database, logger: Logger) {
        self.configuration = configuration
        self.database = database
        self.logger = logger
    }

    /// Reads the feed and calls `deliver` with each change in commit order; returns after `limit`
    /// changes, when caught up (without `follow`), or when the task is cancelled.
    /// - Throws: ``ReconcilerError/Code/feedPositionPruned``, an error `deliver` throws, or a database error (without
    ///   `follow`; a follower waits for the database instead).
    package func run(_ deliver: (PurchaseStore.FeedChange) async throws -> Void) async throws {
        let store = PurchaseStore(logger: logger)
        let configuration = self.configuration
        guard var position = try await database.transaction({ try await store.position(of: configuration.since, on: $0) }) else {
            throw Self.positionPruned(after: configuration.since)
        }
        // --since 0 reads from the oldest change kept, wherever pruning has left that.
        var fromOldestKept = configuration.since == 0
        let (wakeups, wake) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        try await withThrowingTaskGroup(of: Void.self) { group in
            if configuration.follow {
                group.addTask { await listen(wake: wake) }
                group.addTask {
                    while true {
                        try await Task.sleep(for: configuration.pollInterval)
                        wake.yield()
                    }
                }
            }
            defer { group.cancelAll() }
            var delivered = 0
            var wakeup = wakeups.makeAsyncIterator()
            while !Task.isCancelled {
                let wanted = min(configuration.batch, configuration.limit.map { $0 - delivered } ?? .max)
                let read: PurchaseStore.FeedBatch
                do {
                    read = try await database.transaction { [position] in
                        try await store.changes(
                            after: position, limit: wanted, apps: configuration.apps, appAccountToken: configuration.appAccountToken,
                            runId: configuration.runId, kind: configuration.kind, appUserId: configuration.appUserId, on: $0)
                    }
                } catch let error as ReconcilerError where error.code == .databaseUnavailable && configuration.follow {
                    // A follower outlives an outage: nothing is skipped, it reads from the same position later.
                    logger.warning("the database is unreachable; reading again later", metadata: ["error": "\(error)"])
                    _ = await wakeup.next()
                    continue
                }
                // Rows after this follower's position were pruned before it read them: it must
                // resync, as it would be told at start. (The first read from 0 starts at the oldest row kept.)
                if read.missedPrunedRows, !fromOldestKept { throw Self.positionPruned(after: position.changeId) }
                fromOldestKept = false
                for change in read.changes {
                    // Cancellation ends the feed between changes: each one is delivered whole.
                    if Task.isCancelled { return }
                    try await deliver(change)
                    delivered += 1
                }
                position = read.end
                if let limit = configuration.limit, delivered >= limit { return }
                // A full batch: more is waiting now.
                if read.changes.count == wanted { continue }
                guard configuration.follow else { return }
                guard await wakeup.next() != nil else { return }
            }
        }
    }

    /// Wakes the follower on every notification of a committed change, on a connection of its own,
    /// reconnecting after a failure; each (re)connection wakes it once too, for what committed meanwhile.
    private func listen(wake: AsyncStream<Void>.Continuation) async {
        var failures = 0
        while !Task.isCancelled {
            let connected = Mutex(false)
            do {
                try await database.listen(on: PurchaseStore.changeChannel) { notifications in
                    connected.withLock { $0 = true }
                    wake.yield()
                    for try await _ in notifications { wake.yield() }
                }
            } catch is CancellationError {
                return
            } catch {
                failures = connected.withLock { $0 } ? 1 : failures + 1
                logger.warning(
                    "lost the LISTEN connection; reconnecting (changes are still read every poll interval)",
                    metadata: ["error": "\(error)"])
            }
            // Backs off while the database is away; polling keeps the feed moving meanwhile.
            try? await Task.sleep(for: .milliseconds(min(30_000, 500 << min(failures, 6))))
        }
    }
}

extension ChangeFeedFollower {
    /// The follower's position is no longer in the feed, or changes after it were pruned before it
    /// read them: changes may be gone for its consumer.
    static func positionPruned(after changeId: Int64) -> ReconcilerError {
        ReconcilerError(
            .feedPositionPruned,
            """
            change \(changeId) is not in the feed, or changes after it were pruned (--prune-before, reconciler prune) or never \
            written, so changes after it may be gone; resync this consumer: take `reconciler changes --newest`, load \
            `reconciler export`, then follow --since the id taken
            """)
    }
}
