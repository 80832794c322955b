import AppStoreServer
import Foundation
import Logging
import ReconcilerDomain
import ReconcilerShared
import ReconcilerStore

/// Phase 1: pages Get Notification History shard by shard, concurrently, and replays every
/// `signedPayload` through the ``NotificationHandler`` (source `history`, tagged with the run).
///
/// A page is fetched and verified with no transaction open; then its effects, its checkpoint
/// (the next pagination token), its counts, the purchases it changed, its rejections and the
/// customers it touched commit in one short transaction. The checkpoint advances only from the
/// position the page was fetched from, so a killed run resumes at the first page not committed,
/// nothing is applied twice, and two processes can never both replay a shard. A payload that
/// fails verification is quarantined, never applied; signed data for another app or a window
/// where most payloads fail their chain stops the run as a configuration error instead. An
/// expired pagination token restarts its shard from the beginning, which dedup makes harmless.
struct NotificationReplayer: Sendable {
    struct Configuration: Sendable {
        /// Shards paged at the same time; the client's rate limiter keeps the total within budget.
        var concurrency: Int
        /// How often one shard may restart after expired tokens before it is reported as failed.
        var maximumRestarts: Int = 5
        /// The most pieces one split cuts a shard's remaining range into.
        var maximumPiecesPerSplit: Int = 16
    }

    let configuration: Configuration
    let context: RunContext

    var run: RunRecord { context.run }
    var runId: Int64 { context.run.runId }
    var client: AppStoreServerAPIClient { context.client }
    var ledger: RunLedger { context.ledger }
    var progress: RunProgress { context.progress }
    var logger: Logger { context.logger }

    /// Replays every pending shard; returns when all are done or failed.
    func replay() async throws {
        let shards = try await ledger.shards(runId: runId)
        progress.update {
            $0.phase = "replay"
            $0.shardsTotal = shards.count
            $0.shardsDone = shards.filter { $0.status == .done }.count
            $0.pages = shards.pagesDone
        }
        // Most urgent first: shards are taken in plan order by a fixed number of workers.
        let pending = shards.filter { $0.status == .pending }
        let queue = ShardQueue(pending)
        // A run that forwards holds its other deliveries back until its consumption requests are queried.
        let consumptionQuery = OutstandingShards(pending.filter(\.isConsumptionQuery).count)
        if run.options.forwardTo != nil, await consumptionQuery.count > 0 { context.deliveryHold.start() }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<max(configuration.concurrency, 1) {
                group.addTask {
                    while let shard = await queue.next() {
                        do {
                            try Task.checkCancellation()
                            try await replayShard(shard, queue: queue, consumptionQuery: consumptionQuery)
                            await queue.finished()
                            if shard.isConsumptionQuery, await consumptionQuery.finish() == 0 { try await releaseHeldDeliveries() }
                        } catch {
                            await queue.close()
                            throw error
                        }
                    }
                }
            }
            // The first error stops the other workers (leaving the group cancels them).
            for try await _ in group {}
        }
        // A page that read the hold just before it ended may have committed after the release.
        if run.options.forwardTo != nil { try await releaseHeldDeliveries(always: true) }
    }

    /// Ends the hold on the run's deliveries (``RunContext/DeliveryHold``) and makes the deliveries
    /// it held due, in the order they were queued; `always` releases again even when the hold was over.
    private func releaseHeldDeliveries(always: Bool = false) async throws {
        let ended = context.deliveryHold.end()
        guard ended || always else { return }
        let released = try await ForwardQueue(database: context.database).releaseHeld(runId: runId)
        if ended {
            logger.info(
                "the consumption requests are queried: the run's other deliveries to the app's webhook go now", metadata: ["released": "\(released)"])
        }
    }

    private func replayShard(_ record: ShardRecord, queue: ShardQueue, consumptionQuery: OutstandingShards) async throws {
        var shard = record.shard
        var position = record.position
        var retentionMoves = 0
        var restarts = record.restarts
        var cursor = Cursor.start
        while true {
            do {
                for try await page in client.notificationHistory(shard.request, startingAt: position.paginationToken) {
                    let verified = try await VerifiedHistoryPage(items: page.items, context: context)
                    let split = splitAfter(
                        verified, hasMore: page.hasMore, of: shard, pagesDone: position.pagesDone + 1, cursor: &cursor,
                        idleWorkers: await queue.idleWorkers)
                    try await replayPage(verified, page: page, shard: shard, from: position, splittingAt: split)
                    if let split {
                        // The rest of the range is the pieces' now; this chain ends here.
                        progress.update {
                            $0.shardsDone += 1
                            $0.shardsTotal += split.pieces.count
                        }
                        if record.isConsumptionQuery { await consumptionQuery.add(split.pieces.count) }
                        await queue.add(
                            split.pieces.map {
                                ShardRecord(shard: $0, paginationToken: nil, pagesDone: 0, notificationsSeen: 0, restarts: 0, status: .pending)
                            })
                        return
                    }
                    position = ShardRecord.Position(paginationToken: page.nextPaginationToken, pagesDone: position.pagesDone + 1)
                }
                progress.update { $0.shardsDone += 1 }
                return
            } catch AppStoreServerAPIError.paginationTokenExpired(let details) {
                restarts += 1
                cursor = .start
                guard restarts <= configuration.maximumRestarts else {
                    try await fail(shard, .retryable, "pagination token expired \(Plural.count(restarts, "time")): \(details)")
                    return
                }
                logger.info(
                    "pagination token expired; restarting the shard from its start",
                    metadata: [
                        "query": "\(shard.filter)", "shardStart": "\(shard.window.start)",
                    ])
                position = try await ledger.restartShard(runId: runId, shard: shard, from: position)
            } catch let error as AppStoreServerAPIError where error.details.errorCode == .startDateTooFarInPast {
                // Near the edge of Apple's retention (reported refused ~170 days back): start later,
                // give the slice before up as lost, loudly, and replay the rest.
                guard let moved = try await moveStart(of: shard, from: position, moves: retentionMoves, error: error) else { return }
                (shard, position, cursor, retentionMoves) = (
                    moved, ShardRecord.Position(paginationToken: nil, pagesDone: 0), .start, retentionMoves + 1
                )
            } catch let error as AppStoreServerAPIError {
                // Bad credentials fail every request: stop the run instead of failing each shard.
                if error.refusesTheCredentials { throw error }
                try await fail(shard, error.failureKind, error.description)
                return
            }
        }
    }

    /// How often a shard's start moves forward after 4000012 StartDateTooFarInPast before the shard fails.
    static let maximumRetentionMoves = 4

    /// Moves a shard's start forward after Apple refused it as too far in the past: first to an
    /// hour inside the retention Apple documents, then halfway to its end, up to three times; the
    /// slice before the new start is recorded as lost (given up, so the run exits 4). Returns the
    /// shard that replays the rest, or `nil` when nothing is left (the shard then failed or is done).
    private func moveStart(
        of shard: ReplayPlanner.Shard, from position: ShardRecord.Position, moves: Int, error: AppStoreServerAPIError
    ) async throws -> ReplayPlanner.Shard? {
        guard moves < Self.maximumRetentionMoves else {
            try await fail(shard, .permanent, "\(error.description); still refused after moving the start \(Plural.count(moves, "time"))")
            return nil
        }
        let edge = (Timestamp.now - ReconcileRun.retention(run.environment) + .hours(1)).millisecondsSince1970
        let start = moves == 0 ? max(shard.start + 1, edge) : shard.start + (shard.end - shard.start) / 2
        let rest = start < shard.end ? ReplayPlanner.Shard(queryIndex: shard.queryIndex, filter: shard.filter, start: start, end: shard.end) : nil
        let lost = "Apple's notification history no longer serves it (4000012 StartDateTooFarInPast): its notifications are lost"
        try await ledger.moveShardStart(runId: runId, shard: shard, from: position, to: rest, lostReason: lost)
        logger.error(
            "Apple refused a shard's start as too far in the past: the slice before the new start is lost",
            metadata: [
                "query": "\(shard.filter)",
                "lost":
                    "\(ReplayPlanner.Shard(queryIndex: shard.queryIndex, filter: shard.filter, start: shard.start, end: min(start, shard.end)).window)",
                "resumesAt": "\(rest.map { "\($0.window.start)" } ?? "nothing left")",
            ])
        if rest == nil { progress.update { $0.shardsDone += 1 } }
        return rest
    }

    private func fail(_ shard: ReplayPlanner.Shard, _ kind: FailureKind, _ error: String) async throws {
        let outcome = try await ledger.failShard(runId: runId, shard: shard, kind: kind, error: error, policy: context.giveUp)
        var metadata: Logger.Metadata = [
            "query": "\(shard.filter)", "shardStart": "\(shard.window.start)", "shardEnd": "\(shard.window.end)",
            "kind": "\(kind.rawValue)", "error": "\(error)",
        ]
        if case .givenUp(let failures) = outcome {
            metadata["failuresInARow"] = "\(failures)"
            logger.error("shard given up: its notifications are not replayed; `reconciler rejections` lists it", metadata: metadata)
        } else {
            logger.error("shard failed", metadata: metadata)
        }
        progress.update { $0.shardsFailed += 1 }
    }

    /// Where a dense shard is cut, and the pieces of the rest of its range.
    struct Split: Sendable {
        var cut: Int64
        var pieces: [ReplayPlanner.Shard]
    }

    /// How far a shard's pages have come: the newest `signedDate` they showed.
    enum Cursor: Equatable {
        /// No page yet (or the shard restarted).
        case start
        case at(Int64)
        /// A page came further out of order than ``ReplayPlanner/splitMargin``: no cut is safe.
        case unsplittable
    }

    /// Whether to split the shard after this page: when workers are idle and its pages show that
    /// more than one page is left. The cursor, the newest `signedDate` of the shard's verified
    /// notifications so far, says how far through its range the shard is, and how many pages the
    /// rest will take at that rate; it is also the cut.
    ///
    /// Apple documents neither the date a window selects on nor the order of the pages: `signedDate`
    /// or the first send attempt, which comes later by less than ``ReplayPlanner/splitMargin``.
    /// Either way, pages are in `signedDate` order to within the margin, and every notification
    /// not returned yet was signed no earlier than the cut less the margin, where the pieces start
    /// (``ReplayPlanner/pieces(of:from:count:)``). A notification more than the margin out of order
    /// makes the shard unsplittable: it is paged to its end.
    private func splitAfter(
        _ page: VerifiedHistoryPage, hasMore: Bool, of shard: ReplayPlanner.Shard, pagesDone: Int, cursor: inout Cursor,
        idleWorkers: Int
    ) -> Split? {
        var newest: Int64?
        switch cursor {
        case .unsplittable: return nil
        case .start: newest = nil
        case .at(let date): newest = date
        }
        // A payload that failed verification, or has no signedDate, says nothing about the order.
        for signed in page.notifications.map(\.signedDate) where signed > 0 {
            if let newest, signed < newest - ReplayPlanner.splitMargin {
                cursor = .unsplittable
                return nil
            }
            newest = max(newest ?? signed, signed)
        }
        guard let newest else { return nil }
        cursor = .at(newest)
        guard hasMore, idleWorkers > 0 else { return nil }
        let covered = max(newest - shard.start, 1)
        let pagesLeft = Int(min(max(shard.end - newest, 0) * Int64(pagesDone) / covered, 1_000))
        guard pagesLeft >= 2 else { return nil }
        let pieces = ReplayPlanner(configuration: run.options.planner)
            .pieces(of: shard, from: newest, count: min(idleWorkers + 1, pagesLeft, configuration.maximumPiecesPerSplit))
        return pieces.isEmpty ? nil : Split(cut: newest, pieces: pieces)
    }

    /// Applies a verified page and its checkpoint (or its split) in one transaction.
    private func replayPage(
        _ verified: VerifiedHistoryPage, page: NotificationHistoryPage, shard: ReplayPlanner.Shard, from position: ShardRecord.Position,
        splittingAt split: Split?
    ) async throws {
        let (run, context, ledger) = (self.run, self.context, self.ledger)
        let outcome: VerifiedHistoryPage.Recorded
        do {
            try await context.database.storeHeaders(of: verified.notifications.flatMap(\.signedParts))
            outcome = try await context.database.transaction { transaction in
                let recorded = try await verified.record(context: context, on: transaction)
                if let split {
                    try await ledger.split(
                        runId: run.runId, shard: shard, from: position, at: split.cut, into: split.pieces,
                        notificationsSeen: page.items.count, on: transaction)
                } else {
                    try await ledger.checkpoint(
                        runId: run.runId, shard: shard, from: position, nextToken: page.nextPaginationToken,
                        done: !page.hasMore, notificationsSeen: page.items.count, on: transaction)
                }
                // Customers of what this run recorded first (a duplicate was handled when it was
                // first recorded), with when Apple signed what touched them.
                let signedDates = Dictionary(verified.notifications.map { ($0.notificationUUID, $0.signedDate) }, uniquingKeysWith: max)
                let recordedFirst = recorded.results.filter { $0.outcome != .duplicate }
                let anchors = try await context.store.customers.anchorsByPurchase(
                    of: recordedFirst.compactMap(\.originalTransactionId), on: transaction)
                let touches = recordedFirst.compactMap { result in
                    result.originalTransactionId.flatMap { anchors[$0] }.map {
                        RunLedger.Touch(anchor: $0, newestSignedDate: signedDates[result.notificationUUID])
                    }
                }
                try await ledger.enqueue(runId: run.runId, touches: touches, on: transaction)
                return recorded
            }
        } catch let conflict as ReconcilerError where conflict.code == .checkpointAlreadyCommitted {
            // The page committed before and only its answer was lost: nothing more to do.
            return
        }
        context.newCustomers.notify()
        for rejection in outcome.rejections {
            logger.warning(
                "quarantined a notification from history",
                metadata: [
                    "reason": "\(rejection.reason.rawValue)", "notificationUUID": "\(rejection.notificationUUID ?? "?")",
                    "new": "\(rejection.newlyQuarantined)",
                ])
        }
        progress.update { progress in
            progress.pages += 1
            progress.notificationsSeen += page.items.count
            progress.applied += outcome.results.filter { $0.outcome == .applied }.count
            progress.duplicates += outcome.results.filter { $0.outcome == .duplicate }.count
            progress.rejected += outcome.rejections.count
        }
    }
}

/// How many shards of one query are not finished yet (pieces of a split count until they finish).
actor OutstandingShards {
    private(set) var count: Int

    init(_ count: Int) { self.count = count }

    func add(_ pieces: Int) { count += pieces }

    /// One finished; returns how many are left.
    func finish() -> Int {
        count = max(count - 1, 0)
        return count
    }
}

extension ShardRecord {
    /// Whether it is a shard of the query of consumption requests.
    var isConsumptionQuery: Bool { shard.filter.notificationType == .consumptionRequest }
}
