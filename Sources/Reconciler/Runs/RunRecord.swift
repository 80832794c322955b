import Foundation

/// How a run was asked to work; stored with it so a resumed run keeps its plan.
public struct RunOptions: Sendable, Codable, Hashable {
    public var planner: ReplayPlanner.Configuration
    /// Phase 2 also checks every known customer, not only those at risk.
    public var allCustomers: Bool
    /// Phase 2 also calls Get All Subscription Statuses (replayed notifications are snapshots).
    public var refreshStatus: Bool

    public init(planner: ReplayPlanner.Configuration = .init(), allCustomers: Bool = false, refreshStatus: Bool = false) {
        self.planner = planner
        self.allCustomers = allCustomers
        self.refreshStatus = refreshStatus
    }
}

/// A row of `reconcile_runs`.
public struct RunRecord: Sendable, Codable, Hashable {
    public enum Status: String, Sendable, Codable {
        case running, succeeded, partial, failed, interrupted
    }

    public enum Phase: String, Sendable, Codable {
        case replay
        case gapFill = "gap_fill"
        case done
    }

    public var runId: Int64
    public var environment: String
    public var bundleId: String
    public var windowStart: Int64
    public var windowEnd: Int64
    public var dryRun: Bool
    public var options: RunOptions
    public var status: Status
    public var phase: Phase
    public var startedAt: Date
    public var updatedAt: Date
    public var finishedAt: Date?
    public var holder: String?
}

/// A row of `run_shards`: one query over one time shard and how far it got.
public struct ShardRecord: Sendable, Hashable {
    public enum Status: String, Sendable { case pending, done, failed }

    public var shard: ReplayPlanner.Shard
    public var paginationToken: String?
    public var pagesDone: Int
    public var notificationsSeen: Int
    public var restarts: Int
    public var status: Status
    public var lastError: String?
}

/// A signed value a run refused.
public struct Rejection: Sendable, Codable, Hashable {
    public var phase: String
    public var notificationUUID: String?
    public var reason: String
    public var detail: String
    public var payloadSHA256: String
}
