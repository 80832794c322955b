package import AppStoreServer
package import Foundation
package import ReconcilerDomain
package import ReconcilerShared

/// How a run was asked to work; stored with it so a resumed run keeps its plan.
package struct RunOptions: Sendable, Codable, Hashable {
    package var planner: ReplayPlanner.Configuration
    /// Phase 2 also checks every known customer, not only those at risk.
    package var allCustomers: Bool
    /// Phase 2 also calls Get All Subscription Statuses (replayed notifications are snapshots).
    package var refreshStatus: Bool
    /// The app's own webhook: each notification the run records for the first time that Apple did
    /// not deliver is queued for it. Its id and redacted URL only: the URL comes from the
    /// configuration of the process that delivers.
    package var forwardTo: ForwardingTarget?
    /// A repair: the customer it was asked for, as the command line named it (`order-id MQ5Q7X2ZYB`).
    package var repairOf: String?

    package init(
        planner: ReplayPlanner.Configuration = .init(), allCustomers: Bool = false, refreshStatus: Bool = false, forwardTo: ForwardingTarget? = nil,
        repairOf: String? = nil
    ) {
        self.planner = planner
        self.allCustomers = allCustomers
        self.refreshStatus = refreshStatus
        self.forwardTo = forwardTo
        self.repairOf = repairOf
    }

    /// Options a row lacks take their defaults (a run recorded by an older version, or by hand).
    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            planner: try container.decodeIfPresent(ReplayPlanner.Configuration.self, forKey: .planner) ?? .init(),
            allCustomers: try container.decodeIfPresent(Bool.self, forKey: .allCustomers) ?? false,
            refreshStatus: try container.decodeIfPresent(Bool.self, forKey: .refreshStatus) ?? false,
            forwardTo: try container.decodeIfPresent(ForwardingTarget.self, forKey: .forwardTo),
            repairOf: try container.decodeIfPresent(String.self, forKey: .repairOf))
    }
}

/// A row of `reconcile_runs`.
package struct RunRecord: Sendable, Codable, Hashable {
    package enum Status: String, Sendable, Codable, CaseIterable {
        case running
        /// Everything in the window was recovered.
        case succeeded
        /// Everything was recovered, but payloads were quarantined (or customers refused by Apple)
        /// for the first time: a person should look. The schedule moves on.
        case succeededWithRejections = "succeeded_with_rejections"
        /// Something retryable failed; rerunning resumes the run.
        case partial
        /// The run stopped: a configuration error or the database; see `failure`.
        case failed
        /// SIGINT or SIGTERM; rerunning resumes the run.
        case interrupted
        /// A scheduled window that left Apple's retention before it could be finished.
        case lost

        /// The window needs no more work: the schedule moves past it.
        package var isFinished: Bool { self == .succeeded || self == .succeededWithRejections || self == .lost }
    }

    package enum Phase: String, Sendable, Codable {
        case replay
        case gapFill = "gap_fill"
        case done
    }

    /// Why a run exists; only scheduled runs form the schedule's chain of windows.
    package enum Kind: String, Sendable, Codable, CaseIterable {
        /// `run --start T --end T`.
        case manual
        /// `run --since-last`: the next window of the schedule.
        case scheduled
        /// A window `detect-outage` found (`run --detected`).
        case detected
        /// One customer, by `reconciler repair`; its window is the notification history it read.
        /// It holds no run lease and never moves the schedule's chain.
        case repair
    }

    package var runId: Int64
    package var kind: Kind
    package var environment: String
    package var bundleId: String
    package var window: TimeWindow
    package var dryRun: Bool
    package var options: RunOptions
    package var status: Status
    package var phase: Phase
    package var startedAt: Date
    package var updatedAt: Date
    package var finishedAt: Date?
    package var holder: String?
    /// Why a failed run failed.
    package var failure: String?
    /// When phase 1 (the replay) finished; phase 2 runs beside it and ends with the run.
    package var replayFinishedAt: Date?
}

/// Whether a failure is worth retrying: the next run retries `retryable` ones; `permanent` ones
/// (Apple refused the request) need a person and do not hold the schedule back.
package enum FailureKind: String, Sendable, Codable {
    case retryable
    case permanent
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

/// A signed value from Apple's API that failed verification. It is quarantined (stored once, never
/// applied) and reported by every run that meets it.
package struct Rejection: Sendable, Codable, Hashable {
    /// The API response the value came in.
    package enum Source: String, Sendable, Codable, CaseIterable {
        case notificationHistory = "notification_history"
        case transactionHistory = "transaction_history"
        case subscriptionStatus = "subscription_status"
        /// Look Up Order ID (`reconciler repair --order-id`).
        case orderLookup = "order_lookup"
    }

    package var source: Source
    /// What the payload claims to be, read without trusting it; only to name it.
    package var notificationUUID: String?
    package var typeAndSubtype: String?
    package var reason: VerificationError.Reason
    package var detail: String
    package var payloadSHA256: String
    /// Whether this run quarantined it (the first run to meet it); `false`: it was known already.
    package var newlyQuarantined: Bool

    /// The signed value, kept in the quarantine; not part of reports.
    package var signedPayload: String = ""

    private enum CodingKeys: String, CodingKey {
        case source, notificationUUID, typeAndSubtype, reason, detail, payloadSHA256, newlyQuarantined
    }

    /// A rejection of `signedValue` for `error`; the one place rejections are made.
    package init(source: Source, signedValue: String, error: VerificationError) {
        self.source = source
        let claimed = source == .notificationHistory ? UnverifiedPayload.decode(signedValue, as: ResponseBodyV2DecodedPayload.self) : nil
        self.notificationUUID = claimed?.notificationUUID
        self.typeAndSubtype = claimed?.notificationType.map { type in claimed?.subtype.map { "\(type.rawValue)/\($0.rawValue)" } ?? type.rawValue }
        self.reason = error.reason
        self.detail = error.detail
        self.payloadSHA256 = SHA256Hex.digest(signedValue)
        self.newlyQuarantined = true
        self.signedPayload = signedValue
    }

    package init(
        source: Source, notificationUUID: String?, typeAndSubtype: String?, reason: VerificationError.Reason, detail: String,
        payloadSHA256: String, newlyQuarantined: Bool
    ) {
        self.source = source
        self.notificationUUID = notificationUUID
        self.typeAndSubtype = typeAndSubtype
        self.reason = reason
        self.detail = detail
        self.payloadSHA256 = payloadSHA256
        self.newlyQuarantined = newlyQuarantined
    }

    /// How reports name it: the UUID it claims, else the start of its hash.
    package var name: String { notificationUUID ?? String(payloadSHA256.prefix(16)) + "…" }
}
