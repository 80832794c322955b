package import AppStoreServer
package import Foundation
package import ReconcilerDomain
package import ReconcilerShared

/// A row of `reconcile_runs`.
package struct RunRecord: Sendable, Codable, Hashable {
    /// The row's states, the domain's (``RunStatus``, ``RunPhase``, ``RunKind``).
    package typealias Status = RunStatus
    package typealias Phase = RunPhase
    package typealias Kind = RunKind

    package var runId: Int64
    package var kind: Kind
    package var environment: AppStoreEnvironment
    package var bundleId: String
    package var window: TimeWindow
    package var dryRun: Bool
    package var options: RunOptions
    package var status: Status
    package var phase: Phase
    package var startedAt: Date
    var updatedAt: Date
    package var finishedAt: Date?
    package var holder: String?
    /// Why a failed run failed.
    package var failure: String?
    /// When phase 1 (the replay) finished; phase 2 runs beside it and ends with the run.
    package var replayFinishedAt: Date?

    /// The app and environment the run is for, as its row names them.
    package var app: AppTarget { AppTarget(bundleId: bundleId, environment: environment) }
}

/// A row of `run_shards`: one query over one time shard and how far it got.
package struct ShardRecord: Sendable, Hashable {
    package enum Status: String, Sendable {
        case pending, done, failed
        /// Failed in too many attempts in a row (or Apple refused it): never retried, listed in `rejections`.
        case givenUp = "given_up"
    }

    package var shard: ReplayPlanner.Shard
    package var paginationToken: String?
    package var pagesDone: Int
    package var notificationsSeen: Int
    package var restarts: Int
    package var status: Status
    package var failureKind: FailureKind?
    package var lastError: String?

    /// Where the shard's next page starts; a checkpoint only advances from the one it read.
    package var position: Position { Position(paginationToken: paginationToken, pagesDone: pagesDone) }

    package struct Position: Sendable, Hashable {
        package var paginationToken: String?
        package var pagesDone: Int

        package init(paginationToken: String? = nil, pagesDone: Int) {
            self.paginationToken = paginationToken
            self.pagesDone = pagesDone
        }
    }

    package init(
        shard: ReplayPlanner.Shard, paginationToken: String? = nil, pagesDone: Int, notificationsSeen: Int, restarts: Int, status: Status,
        failureKind: FailureKind? = nil, lastError: String? = nil
    ) {
        self.shard = shard
        self.paginationToken = paginationToken
        self.pagesDone = pagesDone
        self.notificationsSeen = notificationsSeen
        self.restarts = restarts
        self.status = status
        self.failureKind = failureKind
        self.lastError = lastError
    }
}
