import AppStoreServer
import Foundation
import Logging
import PostgresNIO
import Synchronization

/// Phase 1: pages Get Notification History shard by shard, concurrently, and replays every
/// `signedPayload` through the ``NotificationHandler`` (source `history`, tagged with the run).
///
/// Each page's effects, its checkpoint (the next pagination token), its counts, the purchases it
/// changed and the customers it touched are committed in one transaction, so a run killed at
/// any moment resumes at the first page not committed, and nothing is applied twice. A payload
/// that fails verification is recorded with its reason and never applied. An expired pagination
/// token restarts its shard from the beginning, which the handler's dedup makes harmless.
public struct NotificationReplayer: Sendable {
    public struct Configuration: Sendable {
        public var runId: Int64
        public var dryRun: Bool
        /// Shards paged at the same time; the client's rate limiter keeps the total within budget.
        public var concurrency: Int
        /// How often one shard may restart after expired tokens before it is reported as failed.
        public var maximumRestarts: Int

        public init(runId: Int64, dryRun: Bool, concurrency: Int = 8, maximumRestarts: Int = 5) {
            self.runId = runId
            self.dryRun = dryRun
            self.concurrency = concurrency
            self.maximumRestarts = maximumRestarts
        }
    }

    let configuration: Configuration
    let handler: NotificationHandler
    let client: AppStoreServerAPIClient
    let ledger: RunLedger
    let progress: RunProgress
    let logger: Logger
    /// In a dry run nothing is stored, so dedup within the run happens here.
    let seenInDryRun = Locked(Set<String>())

    public init(configuration: Configuration, handler: NotificationHandler, client: AppStoreServerAPIClient, ledger: RunLedger,
                progress: RunProgress, logger: Logger) {
        self.configuration = configuration
        self.handler = handler
        self.client = client
        self.ledger = ledger
        self.progress = progress
        self.logger = logger
    }

    /// Replays every pending shard; returns when all are done or failed.
    public func run() async throws {
        let shards = try await ledger.shards(runId: configuration.runId)
        progress.update {
            $0.phase = "replay"
            $0.shardsTotal = shards.count
            $0.shardsDone = shards.filter { $0.status == .done }.count
            $0.pages = shards.reduce(0) { $0 + $1.pagesDone }
        }
        // Most urgent first: shards are taken in plan order by a fixed number of workers.
        let queue = Locked(shards.filter { $0.status == .pending }[...])
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<max(configuration.concurrency, 1) {
                group.addTask {
                    while let shard = queue.withLock({ $0.popFirst() }) {
                        try Task.checkCancellation()
                        try await replay(shard)
                    }
                }
            }
            try await group.waitForAll()
        }
    }

    private func replay(_ record: ShardRecord) async throws {
        let shard = record.shard
        var token = record.paginationToken
        var restarts = record.restarts
        while true {
            do {
                for try await page in client.notificationHistory(shard.request, startingAt: token) {
                    try await apply(page, shard: shard)
                    token = page.nextPaginationToken
                }
                progress.update { $0.shardsDone += 1 }
                return
            } catch AppStoreServerAPIError.paginationTokenExpired(let details) {
                restarts += 1
                guard restarts <= configuration.maximumRestarts else {
                    try await fail(shard, "pagination token expired \(restarts) times: \(details)")
                    return
                }
                logger.info("pagination token expired; restarting the shard from its start", metadata: [
                    "query": "\(shard.filter)", "shardStart": "\(TimeArgument.iso8601(shard.start))",
                ])
                try await ledger.restartShard(runId: configuration.runId, shard: shard)
                token = nil
            } catch let error as AppStoreServerAPIError {
                // Bad credentials fail every request: stop the run instead of failing each shard.
                if case .unauthorized = error { throw error }
                try await fail(shard, error.description)
                return
            }
        }
    }

    private func fail(_ shard: ReplayPlanner.Shard, _ error: String) async throws {
        logger.error("shard failed", metadata: ["query": "\(shard.filter)", "shardStart": "\(TimeArgument.iso8601(shard.start))", "error": "\(error)"])
        try await ledger.failShard(runId: configuration.runId, shard: shard, error: error)
        progress.update { $0.shardsFailed += 1 }
    }

    /// Verifies a page, then applies it and its checkpoint in one transaction.
    private func apply(_ page: NotificationHistoryPage, shard: ReplayPlanner.Shard) async throws {
        var verified: [VerifiedNotification] = []
        var rejections: [Rejection] = []
        var outcomes: [(typeAndSubtype: String, outcome: String)] = []
        for item in page.items {
            let payload = item.signedPayload ?? ""
            do {
                verified.append(try await handler.verify(signedPayload: payload))
            } catch let error as VerificationError {
                let rejection = Rejection(
                    phase: "replay", notificationUUID: Self.unverifiedUUID(payload), reason: error.reason.rawValue, detail: error.detail,
                    payloadSHA256: RunLedger.sha256(payload))
                rejections.append(rejection)
                outcomes.append((Self.unverifiedTypeAndSubtype(payload), "rejected"))
                logger.warning("rejected a notification from history", metadata: [
                    "reason": "\(error.reason.rawValue)", "notificationUUID": "\(rejection.notificationUUID ?? "?")",
                ])
            }
        }
        if configuration.dryRun {
            // Within a dry run, a notification seen before counts as the duplicate it would be.
            let fresh = seenInDryRun.withLock { seen in verified.filter { seen.insert($0.notificationUUID).inserted } }
            outcomes += verified.filter { candidate in !fresh.contains { $0.notificationUUID == candidate.notificationUUID } }
                .map { ($0.typeAndSubtype, "duplicate") }
            verified = fresh
        }
        let runId = configuration.runId
        let dryRun = configuration.dryRun
        let toApply = verified
        let counted = outcomes
        let rejected = rejections
        let results = try await handler.database.transaction { connection in
            let results = try await Effects.apply(dryRun: dryRun, on: connection) {
                try await handler.apply(toApply, source: .history(runId: runId), on: connection)
            }
            try await ledger.checkpoint(runId: runId, shard: shard, nextToken: page.nextPaginationToken, done: !page.hasMore,
                                        notificationsSeen: page.items.count, on: connection)
            try await ledger.count(runId: runId, counted + results.map { ($0.typeAndSubtype, $0.outcome.rawValue) }, on: connection)
            try await ledger.recordChanges(runId: runId, results.compactMap(\.change), on: connection)
            try await ledger.recordRejections(runId: runId, rejected, on: connection)
            try await ledger.enqueueTouched(runId: runId, originalTransactionIds: toApply.compactMap(\.originalTransactionId), on: connection)
            return results
        }
        progress.update { progress in
            progress.pages += 1
            progress.notificationsSeen += page.items.count
            progress.applied += results.filter { $0.outcome == .applied }.count
            progress.duplicates += results.filter { $0.outcome == .duplicate }.count + counted.filter { $0.outcome == "duplicate" }.count
            progress.rejected += rejected.count
        }
    }

    /// The UUID a payload claims, read without trusting it, only to name a rejection.
    static func unverifiedUUID(_ jws: String) -> String? {
        unverifiedPayload(jws)?.notificationUUID
    }

    static func unverifiedTypeAndSubtype(_ jws: String) -> String {
        guard let payload = unverifiedPayload(jws), let type = payload.notificationType else { return "(unreadable)" }
        return payload.subtype.map { "\(type.rawValue)/\($0.rawValue)" } ?? type.rawValue
    }

    static func unverifiedPayload(_ jws: String) -> ResponseBodyV2DecodedPayload? {
        UnverifiedPayload.decode(jws, as: ResponseBodyV2DecodedPayload.self)
    }
}

/// Runs state changes inside a savepoint that a dry run rolls back, while the run's own ledger
/// writes around it still commit: a dry run reports exactly what would change and changes nothing.
enum Effects {
    static func apply<Result>(dryRun: Bool, on connection: PostgresConnection, _ body: () async throws -> Result) async throws -> Result {
        guard dryRun else { return try await body() }
        try await connection.query("SAVEPOINT dry_run_effects", logger: connection.logger)
        let result = try await body()
        try await connection.query("ROLLBACK TO SAVEPOINT dry_run_effects", logger: connection.logger)
        return result
    }
}
