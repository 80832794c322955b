import AppStoreServer
import ReconcilerDomain
import ReconcilerStore

/// One page of Get Notification History, verified with no transaction open, and what recording it
/// inside a transaction means: the run's replay and `reconciler repair` record pages the same way.
///
/// ```swift
/// let page = try await VerifiedHistoryPage(items: response.items, context: context)
/// let recorded = try await context.database.transaction { transaction in try await page.record(context: context, on: transaction) }
/// ```
struct VerifiedHistoryPage: Sendable {
    var notifications: [VerifiedNotification] = []
    /// Payloads that failed verification: quarantined, never applied.
    var rejections: [Rejection] = []
    /// What Apple never delivered (no SUCCESS among its send attempts): what the app's own webhook has not seen.
    var undelivered = Set<String>()
    /// How many items the page held.
    var itemCount: Int

    /// Verifies every item; a verification failure that means a wrong configuration throws (see ``VerificationTally``).
    init(items: [NotificationHistoryResponseItem], context: RunContext) async throws {
        itemCount = items.count
        var failures: [VerificationError] = []
        for item in items {
            let payload = item.signedPayload ?? ""
            do {
                var notification = try await context.handler.verify(signedPayload: payload)
                // Apple's deadlines count from the first send attempt (the attempts are not signed).
                notification.firstSendAttempt = (item.sendAttempts ?? []).compactMap(\.attemptDate).min()
                notifications.append(notification)
                if !(item.sendAttempts ?? []).contains(where: { $0.sendAttemptResult == .success }) {
                    undelivered.insert(notification.notificationUUID)
                }
            } catch let error as VerificationError {
                failures.append(error)
                rejections.append(Rejection(source: .notificationHistory, signedValue: payload, error: error))
            }
        }
        try context.tally.record(verified: notifications.count, failures: failures)
    }

    /// What recording the page did.
    struct Recorded: Sendable {
        var results: [HandlingResult]
        /// The rejections, with whether this run quarantined them first.
        var rejections: [Rejection]
    }

    /// Applies the page through the handler (forwarding what Apple did not deliver when the run
    /// forwards) and records its counts, changes and rejections under the run, in the caller's transaction.
    func record(context: RunContext, on transaction: DatabaseTransaction) async throws -> Recorded {
        let (run, handler, ledger) = (context.run, context.handler, context.ledger)
        // While the run's query of consumption requests is going, the run's other deliveries wait.
        let hold = context.deliveryHold.isHolding ? RunContext.DeliveryHold.longest : nil
        let forwarding =
            run.options.forwardRoutes.isEmpty
            ? nil : NotificationLog.Forwarding(routes: run.options.forwardRoutes, only: undelivered, hold: hold)
        let results = try await handler.apply(notifications, source: .history(runId: run.runId), forwarding: forwarding, on: transaction)
        try await ledger.addCounts(
            runId: run.runId,
            results.map { ($0.typeAndSubtype, .handled($0.outcome)) } + rejections.map { ($0.typeAndSubtype ?? "(unreadable)", .rejected) },
            on: transaction)
        try await ledger.recordChanges(runId: run.runId, results.compactMap(\.change), on: transaction)
        let quarantined = try await ledger.quarantine(
            rejections, runId: run.runId, app: run.app, dryRun: run.dryRun, on: transaction)
        return Recorded(results: results, rejections: quarantined)
    }
}
