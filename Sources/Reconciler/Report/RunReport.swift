package import AppStoreServer
package import Foundation
package import ReconcilerDomain
package import ReconcilerShared
package import ReconcilerStore

/// What a run did, for people (``humanSummary``) and machines (JSON with the same content).
package struct RunReport: Sendable, Codable {
    package struct NotificationCounts: Sendable, Codable, Hashable {
        package var seen = 0
        package var applied = 0
        package var stale = 0
        package var recorded = 0
        package var duplicate = 0
        package var rejected = 0

        mutating func add(_ outcome: CountedOutcome, _ count: Int) {
            switch outcome {
            case .handled(.applied): applied += count
            case .handled(.stale): stale += count
            case .handled(.recorded): recorded += count
            case .handled(.duplicate): duplicate += count
            case .rejected: rejected += count
            }
            seen += count
        }
    }

    package struct FailedShard: Sendable, Codable, Hashable {
        package var query: String
        package var shardStart: Timestamp
        package var shardEnd: Timestamp
        package var kind: FailureKind
        package var error: String
    }

    /// A window of the schedule's chain, as reports list the unfinished ones.
    package struct ScheduledWindow: Sendable, Codable, Hashable {
        package var runId: Int64
        package var windowStart: Timestamp
        package var windowEnd: Timestamp
        package var status: RunStatus

        package init(runId: Int64, window: TimeWindow, status: RunStatus) {
            self.runId = runId
            self.windowStart = window.start
            self.windowEnd = window.end
            self.status = status
        }
    }

    /// A consumption request the run recovered (recorded for the first time), with its deadline as
    /// of when the report was made.
    package struct ConsumptionRequestEntry: Sendable, Codable, Hashable {
        package var notificationUUID: String
        package var transactionId: String?
        package var originalTransactionId: String?
        /// When Apple first tried to send it.
        package var firstSentAt: Timestamp?
        /// The deadline for an answer: 12 hours after `firstSentAt`, else after its signedDate.
        package var respondBy: Timestamp
        /// The deadline had passed, with no answer, when the report was made.
        package var expired: Bool
        /// An answer Apple accepted was sent (`reconciler consumption send`).
        package var answered: Bool
        /// Acked (`reconciler consumption ack`): it needs nothing more from the reconciler.
        package var acked: Bool

        package init(_ request: ConsumptionRequests.Request, at now: Timestamp) {
            notificationUUID = request.notificationUUID
            transactionId = request.transactionId
            originalTransactionId = request.originalTransactionId
            firstSentAt = request.firstSentAt
            respondBy = request.respondBy
            let state = request.state(at: now)
            expired = state == .expired
            answered = state == .answered
            acked = state == .acked
        }

        private enum CodingKeys: String, CodingKey {
            case notificationUUID, transactionId, originalTransactionId, firstSentAt, respondBy, expired, answered, acked
        }

        /// A report stored before acks were reported reads as not acked.
        package init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            notificationUUID = try container.decode(String.self, forKey: .notificationUUID)
            transactionId = try container.decodeIfPresent(String.self, forKey: .transactionId)
            originalTransactionId = try container.decodeIfPresent(String.self, forKey: .originalTransactionId)
            firstSentAt = try container.decodeIfPresent(Timestamp.self, forKey: .firstSentAt)
            respondBy = try container.decode(Timestamp.self, forKey: .respondBy)
            expired = try container.decode(Bool.self, forKey: .expired)
            answered = try container.decode(Bool.self, forKey: .answered)
            acked = try container.decodeIfPresent(Bool.self, forKey: .acked) ?? false
        }

        /// Every key, absent values as `null`.
        package func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(notificationUUID, forKey: .notificationUUID)
            try container.encode(transactionId, forKey: .transactionId)
            try container.encode(originalTransactionId, forKey: .originalTransactionId)
            try container.encode(firstSentAt, forKey: .firstSentAt)
            try container.encode(respondBy, forKey: .respondBy)
            try container.encode(expired, forKey: .expired)
            try container.encode(answered, forKey: .answered)
            try container.encode(acked, forKey: .acked)
        }
    }

    package struct Change: Sendable, Codable, Hashable {
        package var originalTransactionId: String
        package var fields: [String]
        package var before: PurchaseState?
        package var after: PurchaseState
    }

    package var runId: Int64
    package var kind: RunKind
    package var environment: AppStoreEnvironment
    package var bundleId: String
    package var windowStart: Timestamp
    package var windowEnd: Timestamp
    package var window: TimeWindow { TimeWindow(start: windowStart, end: windowEnd) }
    package var dryRun: Bool
    package var status: RunStatus
    /// Why a failed run failed.
    package var failure: String?
    package var startedAt: Date
    package var finishedAt: Date
    package var durationSeconds: Double
    /// When phase 1 (the replay) finished, in seconds after the run started; phase 2 ran beside it.
    package var replaySeconds: Double?
    /// When the last DID_RENEW or EXPIRED notification of the window was applied (the point of
    /// the priority order), in seconds after the run started; `nil` when there was none new.
    package var urgentRecoverySeconds: Double?
    /// Notifications seen in phase 1, in total and by `TYPE/SUBTYPE`.
    package var notifications: NotificationCounts
    package var notificationsByType: [String: NotificationCounts]
    package var shardsTotal: Int
    package var shardsFailed: [FailedShard]
    package var pages: Int
    package var paginationRestarts: Int
    /// Phase 2.
    package var customersChecked: Int
    package var customersFailed: [FailedCustomer]
    package var transactionsFetched: Int
    /// Customers whose stored revision Apple refused (4000005): their history was read from the start.
    package var revisionResets: [String]
    /// Purchases whose exported state changed, before → after, by originalTransactionId: the
    /// first ``listedChangesLimit`` of them, so that a run of millions of notifications keeps its
    /// memory flat. `reconciler changes --run-id` prints every change of the run. A purchase
    /// changed as the change feed counts it (``PurchaseChange/changesPurchase``).
    package var changes: [Change]
    /// How many purchases changed in all.
    package var changesTotal: Int
    /// The change feed's `time` rows this run wrote: purchases whose `entitled` ended as a moment
    /// passed (``TimeRowWriter``), found due when the run ended. Not counted in ``changesTotal``
    /// (time changed them, not the run's recovery) and named by no run in the feed; `nil` for a dry
    /// run, a run that stopped before its end, and a report stored before they were written.
    package var timeRows: Int?
    /// The most changes a report lists.
    package static let listedChangesLimit = 1000
    /// The most changes and consumption requests the text of `status --run ID` shows.
    package static let detailedChangesLimit = 100
    /// Signed values that failed verification: quarantined, never applied.
    package var rejections: [Rejection]
    /// Customers and shards this run gave up on (Apple refused them, or they failed in too many
    /// attempts in a row): never retried, listed by `reconciler rejections`.
    package var givenUp: [RunLedger.GivenUp] = []
    /// With `--since-last`: the scheduled windows still unfinished when this one ended, oldest
    /// first (each rerun of the schedule retries them before its newest window).
    package var unfinishedScheduledWindows: [ScheduledWindow]?
    /// App Store Server API calls by every process of the run that finished its part.
    package var api: APIStatistics.Snapshot
    /// The consumption requests this run recovered, soonest deadline first (the first
    /// ``listedChangesLimit`` of them), as of when the report was made; `nil` in a report stored
    /// before consumption requests were reported. They never change the run's status or exit code.
    package var consumptionRequests: [ConsumptionRequestEntry]?
    /// How many it recovered in all (the list holds the first ``listedChangesLimit``), how many of
    /// them were still before their deadline without an answer or an ack, how many were past it,
    /// and how many were acked (`nil` in a report stored before acks).
    package var consumptionRequestsTotal: Int?
    package var consumptionRequestsOpen: Int?
    package var consumptionRequestsExpired: Int?
    package var consumptionRequestsAcked: Int?
    /// With `--forward-to`: where the deliveries of this run's notifications to the app's webhook
    /// stood when the run ended (after draining the queue for `--forward-drain-timeout`).
    package var forwarding: ForwardQueue.ForwardingSummary?
    /// The purchases of the run's app and environment whose `entitled` is unknown when the report
    /// was made, and the setting that decides it (`nil` in a report stored before it was counted).
    package var unknownEntitlement: UnknownEntitlement?

    /// Something retryable failed: rerunning resumes the run.
    package var hasRetryableFailures: Bool {
        shardsFailed.contains { $0.kind == .retryable } || customersFailed.contains { $0.kind == .retryable }
    }

    /// Something needs a person: payloads quarantined for the first time, requests Apple refused,
    /// or customers and shards given up.
    package var needsAttention: Bool {
        rejections.contains(where: \.newlyQuarantined) || shardsFailed.contains { $0.kind == .permanent }
            || customersFailed.contains { $0.kind == .permanent } || !givenUp.isEmpty
    }

    /// How a run that worked through its whole plan ends. Payloads quarantined by an earlier run
    /// do not count: they were reported then, and must not hold the schedule back.
    package var completedStatus: RunStatus {
        if hasRetryableFailures { return .partial }
        return needsAttention ? .succeededWithRejections : .succeeded
    }

    package func json() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        return try encoder.encode(self)
    }

    /// The summary printed at the end of a run.
    package func humanSummary(maximumChanges: Int = 10) -> String {
        var lines: [String] = []
        let mode = dryRun ? "DRY RUN (nothing was changed) " : ""
        lines.append("\(mode)reconcile run \(runId) (\(kind.rawValue)): \(status.rawValue.uppercased())")
        if let failure { lines.append("  failure      \(failure)") }
        lines.append("  window       \(windowStart) → \(windowEnd)  (\(environment), \(bundleId))")
        lines.append(
            "  duration     \(String(format: "%.1f", durationSeconds)) s"
                + (replaySeconds.map { String(format: " (phase 1 done after %.1f s; phase 2 ran beside it)", $0) } ?? "")
                + (urgentRecoverySeconds.map { String(format: "; renewals and expiries (DID_RENEW, EXPIRED) all applied after %.1f s", $0) } ?? ""))
        let verb = dryRun ? "would apply" : "applied"
        lines.append(
            "  notifications \(notifications.seen) seen: \(notifications.applied) \(verb), \(notifications.duplicate) duplicate, "
                + "\(notifications.stale) stale, \(notifications.recorded) recorded only, \(notifications.rejected) rejected")
        if !notificationsByType.isEmpty {
            let width = max(notificationsByType.keys.map(\.count).max() ?? 0, 4)
            lines.append("    " + "type".padding(toLength: width, withPad: " ", startingAt: 0) + "   seen applied  dup stale  rec  rej")
            for (type, counts) in notificationsByType.sorted(by: { $0.key < $1.key }) {
                lines.append(
                    "    " + type.padding(toLength: width, withPad: " ", startingAt: 0)
                        + String(
                            format: " %6d %7d %4d %5d %4d %4d", counts.seen, counts.applied, counts.duplicate, counts.stale, counts.recorded,
                            counts.rejected))
            }
        }
        lines.append(
            "  history      \(Plural.count(pages, "page")) over \(Plural.count(shardsTotal, "shard")), "
                + "\(Plural.count(paginationRestarts, "expired-token restart")), \(Plural.count(shardsFailed.count, "shard")) failed"
        )
        lines.append(
            "  customers    \(customersChecked) checked by transaction history, \(Plural.count(transactionsFetched, "transaction")) fetched, "
                + "\(customersFailed.count) failed"
        )
        if !revisionResets.isEmpty {
            lines.append(
                "  revisions    Apple refused the stored revision of \(Plural.count(revisionResets.count, "customer")); their history was read from the start: "
                    + revisionResets.prefix(10).joined(separator: ", "))
        }
        let newRejections = rejections.filter(\.newlyQuarantined).count
        lines.append(
            "  rejected     \(Plural.count(rejections.count, "signed value")) quarantined, never applied (\(newRejections) new, \(rejections.count - newRejections) known)"
        )
        lines.append("  changed      \(Plural.count(changesTotal, "purchase"))\(dryRun ? " would change" : "")")
        for change in changes.prefix(maximumChanges) {
            lines.append("    \(change.originalTransactionId)  \(Self.describe(PurchaseChange(before: change.before, after: change.after)))")
        }
        lines += Self.moreLine(total: changesTotal, shown: min(changes.count, maximumChanges), command: moreChangesCommand)
        // Every real run says it looked, 0 included: whether serve's leader wrote the rows first
        // depends only on the clock, so the line does not come and go with it.
        if let timeRows {
            lines.append(
                "  time         purchases that lost entitlement as time passed (expiry, grace period or term ended): \(timeRows); "
                    + "feed rows of source time, not counted above")
        }
        if let line = unknownEntitlement?.line { lines.append("  entitled     \(line)") }
        if let requests = consumptionRequests, !requests.isEmpty {
            let (open, expired) = (consumptionRequestsOpen ?? 0, consumptionRequestsExpired ?? 0)
            let total = consumptionRequestsTotal ?? requests.count
            lines.append(
                "  consumption  \(Plural.count(total, "consumption request")) recovered: \(open) open, \(expired) expired"
                    + (open > 0 ? "; answer them with `reconciler consumption send` (`reconciler consumption list --open`)" : ""))
            for request in requests.prefix(maximumChanges) {
                let state = request.answered ? "answered" : request.acked ? "acked" : request.expired ? "EXPIRED" : "open"
                lines.append(
                    "    \(request.transactionId ?? "?")  respond by \(request.respondBy)  \(state)"
                        + (request.firstSentAt.map { "  (first sent \($0))" } ?? ""))
            }
            lines += Self.moreLine(
                total: total, shown: min(requests.count, maximumChanges),
                command: "reconciler consumption list --app \(bundleId) --environment \(environment)")
        }
        if let forwarding {
            lines.append(
                "  forwarded    \(Plural.count(forwarding.delivered, "notification")) delivered to the app's webhook, \(forwarding.pending) pending, "
                    + "\(forwarding.failed) failed" + (forwarding.pending > 0 ? " (`reconciler forward` or the next run delivers the rest)" : ""))
        }
        lines.append(
            "  api          \(Plural.count(api.requests, "request")), \(Plural.count(api.retries, "retry", "retries")), \(api.rateLimited) × 429, "
                + "\(api.serverErrors) × 5xx, \(Plural.count(api.transportErrors, "connection error"))")
        for shard in shardsFailed {
            lines.append(
                "  FAILED shard (\(shard.kind.rawValue)) \(shard.query) \(shard.shardStart)–\(shard.shardEnd): \(shard.error)"
            )
        }
        for customer in customersFailed {
            lines.append("  FAILED customer (\(customer.kind.rawValue)) \(customer.anchorTransactionId): \(customer.error)")
        }
        for item in givenUp {
            let why = item.failureKind == .permanent ? "Apple refused it" : "failed in \(Plural.count(item.failures, "attempt")) in a row"
            lines.append("  GIVEN UP \(item.kind.rawValue) \(item.subject) (\(why)): \(item.reason)")
        }
        for rejection in rejections {
            lines.append(
                "  \(rejection.newlyQuarantined ? "QUARANTINED" : "QUARANTINED BEFORE") \(rejection.source.rawValue) \(rejection.name): "
                    + "\(rejection.reason.rawValue) \(rejection.detail)")
        }
        if hasRetryableFailures {
            lines.append("  Not everything was recovered: rerun the same command to retry what failed (it resumes this run).")
        }
        if needsAttention {
            lines.append(
                "  Needs attention: `reconciler rejections` lists the quarantine and what was given up; failures marked permanent were refused by Apple."
            )
        }
        if let unfinished = unfinishedScheduledWindows, !unfinished.isEmpty {
            lines.append(
                "  schedule     \(unfinished.count) scheduled window\(unfinished.count == 1 ? " is" : "s are") unfinished and retried by every `run --since-last`: "
                    + unfinished.prefix(5).map {
                        "run \($0.runId) \($0.windowStart) → \($0.windowEnd) (\($0.status.rawValue))"
                    }
                    .joined(separator: ", "))
        }
        return lines.joined(separator: "\n")
    }

    /// The line under a list the text shows `shown` of `total`: how many more there are, and a
    /// command that shows them, which works once the run has ended.
    static func moreLine(total: Int, shown: Int, command: String) -> [String] {
        guard total > shown else { return [] }
        return ["    … \(total - shown) more: `\(command)`"]
    }

    /// The command that shows every purchase the run changed, after the run: the change feed's rows
    /// of the run; a dry run wrote none (its copies are dropped), so its own report, as `status`
    /// shows it (the first ``detailedChangesLimit``) or as JSON (the first ``listedChangesLimit``).
    package var moreChangesCommand: String {
        guard dryRun else { return "reconciler changes --run-id \(runId) --kind purchase" }
        return changesTotal > Self.detailedChangesLimit ? "reconciler status --run \(runId) --json" : "reconciler status --run \(runId)"
    }

    /// A purchase's change in one line: the fields that changed, before → after.
    static func describe(_ change: PurchaseChange) -> String {
        let changed = change.after.changedFields(from: change.before)
        // lastSignedDate moves with almost every change, and the identifiers come with a new purchase;
        // show them only when they are the change.
        let fields = changed.count > 1 ? changed.filter { !["lastSignedDate", "environment", "appTransactionId"].contains($0) } : changed
        return change.before == nil
            ? "new: " + fields.map { "\($0) \(value($0, change.after))" }.joined(separator: ", ")
            : fields.map { "\($0) \(value($0, change.before)) → \(value($0, change.after))" }.joined(separator: ", ")
    }

    package static func value(_ field: String, _ state: PurchaseState?) -> String {
        guard let state else { return "∅" }
        func date(_ value: Int64?) -> String { value.map { Timestamp(millisecondsSince1970: $0).description } ?? "null" }
        switch field {
        case "latestTransactionId": return state.latestTransactionId ?? "null"
        case "productId": return state.productId ?? "null"
        case "environment": return state.environment?.rawValue ?? "null"
        case "purchaseDate": return date(state.purchaseDate)
        case "expiresDate": return date(state.expiresDate)
        case "revocationDate": return date(state.revocationDate)
        case "autoRenewStatus": return state.autoRenewStatus.map(String.init) ?? "null"
        case "lastSignedDate": return date(state.lastSignedDate)
        case "appAccountToken": return state.appAccountToken ?? "null"
        case "status": return state.status.map(String.init) ?? "null"
        case "entitled": return state.entitled.map(String.init) ?? "unknown"
        case "appTransactionId": return state.appTransactionId ?? "null"
        case "revocationType": return state.revocationType ?? "null"
        case "revocationPercentage": return state.revocationPercentage.map(String.init) ?? "null"
        case "offerType": return state.offerType.map(String.init) ?? "null"
        case "offerIdentifier": return state.offerIdentifier ?? "null"
        case "appUserId": return state.appUserId ?? "null"
        default: return "∅"
        }
    }
}
