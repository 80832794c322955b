package import AppStoreServer
package import Foundation
package import ReconcilerDomain
package import ReconcilerShared
package import ReconcilerStore

/// What `reconciler repair` did for one customer, for people (``humanSummary()``) and tools
/// (JSON with the same content). A dry run's report is the real repair's, with `dryRun` set.
package struct RepairReport: Sendable, Codable {
    /// A notification the webhook never stored, recorded now.
    package struct MissedNotification: Sendable, Codable, Hashable {
        package var notificationUUID: String
        /// `TYPE` or `TYPE/SUBTYPE`.
        package var type: String
        package var signedDate: Int64
        package var originalTransactionId: String?
        /// `applied`, `stale` (older than what the purchase reflected: recorded, nothing taken back) or `recorded`.
        package var outcome: HandlingResult.Outcome
        /// Whether Apple's send attempts include a SUCCESS (then the webhook answered but did not keep it).
        package var deliveredByApple: Bool
    }

    /// A subscription's status as Get All Subscription Statuses reported it (verified).
    package struct AppleStatus: Sendable, Codable, Hashable {
        package var originalTransactionId: String
        package var productId: String?
        /// 1 active, 2 expired, 3 billing retry, 4 grace period, 5 revoked.
        package var status: Int32?
        package var expiresDate: Int64?
        package var autoRenewStatus: Int32?
        package var gracePeriodExpiresDate: Int64?

        /// Apple's name of the status.
        package var statusName: String {
            switch status {
            case 1: "active"
            case 2: "expired"
            case 3: "billing retry"
            case 4: "grace period"
            case 5: "revoked"
            case let other?: "status \(other)"
            case nil: "no status"
            }
        }
    }

    /// A step of the repair that Apple did not complete (the rest of the repair went on).
    package struct Failure: Sendable, Codable, Hashable {
        /// `notification history` or `transaction history`.
        package var step: String
        package var transactionId: String
        package var kind: FailureKind
        package var error: String
    }

    package var runId: Int64
    /// What the repair was asked for: `order-id MQ5Q7X2ZYB`, `transaction-id …`, `app-account-token …`.
    package var selector: String
    package var environment: AppStoreEnvironment
    package var bundleId: String
    package var dryRun: Bool
    package var status: RunRecord.Status
    package var startedAt: Date
    package var durationSeconds: Double
    /// The notification history read for the customer.
    package var windowStart: Timestamp
    package var windowEnd: Timestamp
    /// The transaction ids the customer was read by (one per App Store account found).
    package var customer: [String]
    /// Every purchase of the customer, before the repair and after it (`before` is `null` for one
    /// the database did not have); in `export`'s shape, `entitled` as of the moment each was read.
    package var purchases: [PurchaseChange]
    /// Notifications of the customer in Apple's history, and how many of them were stored already.
    package var notificationsSeen: Int
    package var notificationsAlreadyStored: Int
    /// The ones the webhook had missed, replayed through the same handler.
    package var missedNotifications: [MissedNotification]
    /// Signed transactions Get Transaction History returned (from the stored revision, or all with `--full`).
    package var transactionsFetched: Int
    /// What the transaction history and the statuses changed after the notifications were replayed.
    package var transactionHistoryChanges: [PurchaseChange]
    /// What Get All Subscription Statuses reported.
    package var statuses: [AppleStatus]
    /// Signed values that failed verification: quarantined, never applied.
    package var rejections: [Rejection]
    package var failures: [Failure]
    /// With `--forward-to`: the deliveries of the notifications it recorded to the app's webhook.
    package var forwarding: ForwardQueue.ForwardingSummary?
    package var api: APIStatistics.Snapshot

    /// Purchases whose state the repair changed.
    package var changed: [PurchaseChange] { purchases.filter { $0.isChange } }

    package func json() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        return try encoder.encode(self)
    }

    /// The summary printed at the end of a repair.
    package func humanSummary() -> String {
        var lines: [String] = []
        let would = dryRun ? "would be " : ""
        lines.append("\(dryRun ? "DRY RUN (nothing was changed) " : "")repair \(runId) (\(selector)): \(status.rawValue.uppercased())")
        lines.append("  customer     \(customer.joined(separator: ", "))  (\(environment), \(bundleId))")
        lines.append("  purchases    \(purchases.count), \(changed.count) \(would)changed")
        for purchase in purchases {
            let after = purchase.after
            lines.append("    \(after.originalTransactionId)  \(after.productId ?? "?")")
            let fields = ["entitled", "status", "expiresDate", "revocationDate", "autoRenewStatus", "latestTransactionId"]
            func line(_ state: PurchaseState?) -> String {
                guard let state else { return "∅ (not stored)" }
                return fields.map { "\($0) \(RunReport.value($0, state))" }.joined(separator: ", ")
            }
            if purchase.isChange {
                lines.append("      before  \(line(purchase.before))")
                lines.append("      after   \(line(after))")
            } else {
                lines.append("      unchanged  \(line(after))")
            }
        }
        lines.append(
            "  notifications \(notificationsSeen) in Apple's history since \(windowStart), "
                + "\(notificationsAlreadyStored) stored already, \(missedNotifications.count) missed by the webhook and \(dryRun ? "would be " : "")replayed"
        )
        for missed in missedNotifications {
            lines.append(
                "    \(Timestamp(millisecondsSince1970: missed.signedDate))  \(missed.type)  \(missed.originalTransactionId ?? "-")  "
                    + "\(missed.outcome.rawValue)\(missed.deliveredByApple ? "" : " (Apple never delivered it)")")
        }
        lines.append(
            "  transactions \(transactionsFetched) fetched by Get Transaction History; with the statuses they \(dryRun ? "would change" : "changed") "
                + "\(Plural.count(transactionHistoryChanges.count, "purchase")) after the replay")
        for change in transactionHistoryChanges {
            lines.append("    \(change.after.originalTransactionId)  \(RunReport.describe(change))")
        }
        lines.append(
            "  statuses     Apple reports "
                + (statuses.isEmpty ? "no subscriptions" : "\(statuses.count) subscription\(statuses.count == 1 ? "" : "s"):"))
        for status in statuses {
            var parts = ["\(status.statusName) (\(status.status.map(String.init) ?? "-"))"]
            if let productId = status.productId { parts.append(productId) }
            if let expires = status.expiresDate { parts.append("expires \(Timestamp(millisecondsSince1970: expires))") }
            if let autoRenew = status.autoRenewStatus { parts.append("auto-renew \(autoRenew == 1 ? "on" : "off")") }
            if let grace = status.gracePeriodExpiresDate { parts.append("grace period until \(Timestamp(millisecondsSince1970: grace))") }
            lines.append("    \(status.originalTransactionId)  " + parts.joined(separator: ", "))
        }
        if let forwarding {
            lines.append(
                "  forwarded    \(Plural.count(forwarding.delivered, "notification")) delivered to the app's webhook, \(forwarding.pending) pending, "
                    + "\(forwarding.failed) failed" + (forwarding.pending > 0 ? " (`reconciler forward` delivers the rest)" : ""))
        }
        lines.append(
            "  api          \(Plural.count(api.requests, "request")), \(Plural.count(api.retries, "retry", "retries")), \(api.rateLimited) × 429, "
                + "\(api.serverErrors) × 5xx, \(Plural.count(api.transportErrors, "connection error"))")
        for failure in failures {
            lines.append("  FAILED \(failure.step) (\(failure.kind.rawValue)) \(failure.transactionId): \(failure.error)")
        }
        for rejection in rejections {
            lines.append(
                "  \(rejection.newlyQuarantined ? "QUARANTINED" : "QUARANTINED BEFORE") \(rejection.source.rawValue) \(rejection.name): "
                    + "\(rejection.reason.rawValue) \(rejection.detail)")
        }
        if status == .partial {
            lines.append("  Not everything was repaired: run the same command again (what is done is not done twice).")
        }
        if status == .succeededWithRejections {
            lines.append("  Needs attention: `reconciler rejections` lists the quarantine; failures marked permanent were refused by Apple.")
        }
        return lines.joined(separator: "\n")
    }
}

extension RepairReport {
    /// The error a repair that ran ends its command with: needs attention (4) when it succeeded with
    /// rejections, not repaired in full (2) when it did not succeed; `nil` when it repaired everything.
    package var ending: ReconcilerError? {
        switch status {
        case .succeeded: nil
        case .succeededWithRejections:
            .attention("repaired, but needs attention: see QUARANTINED and FAILED in the report (`reconciler rejections`)")
        default:
            .partial("not everything was repaired (repair \(runId) is \(status.rawValue)); run the same command again")
        }
    }
}
