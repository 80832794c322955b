package import AppStoreServer
import Logging
package import ReconcilerDomain
import ReconcilerShared
package import ReconcilerStore

/// The one handler every notification goes through, live or replayed.
///
/// 1. Verify the JWS (ES256, x5c chain to a configured root, Apple's OIDs, validity at
///    `signedDate`), then the app (`bundleId`, `appAppleId` in production) and `environment`.
/// 2. Verify the nested `signedTransactionInfo` and `signedRenewalInfo` the same way.
/// 3. In one database transaction: record the notification (a known `notificationUUID` is a
///    duplicate and changes nothing), upsert its transaction, and move the purchase forward only
///    where the incoming data is not older than what is stored.
///
/// Applying a notification once or many times, live or replayed, in any order, leaves the same
/// state; a notification that fails verification writes nothing.
///
/// ```swift
/// let handler = NotificationHandler(scope: target.scope, verifier: verifier, database: database)
/// let result = try await handler.handle(signedPayload: body.signedPayload, source: .webhook)
/// ```
package struct NotificationHandler: Sendable {
    /// The app and environment this handler writes, with the app's rule for `entitled`.
    package let scope: AppScope
    package let verifier: SignedDataVerifier
    let database: Database
    let store: PurchaseStore

    /// - Parameters:
    ///   - scope: the app and environment, and its entitlement rule; the verifier must accept
    ///     exactly this app and environment.
    package init(scope: AppScope, verifier: SignedDataVerifier, database: Database) {
        precondition(
            verifier.configuration.target == scope.target, "a handler for \(scope) was given a verifier for \(verifier.configuration.target)")
        self.scope = scope
        self.verifier = verifier
        self.database = database
        self.store = PurchaseStore(database: database, scope: scope)
    }

    /// The same handler writing a dry run's shadow tables instead of the real ones.
    func shadowed(by shadow: ShadowSchema?) -> NotificationHandler {
        NotificationHandler(scope: scope, verifier: verifier, database: database.shadowed(by: shadow))
    }

    /// Verifies a notification and everything signed inside it. Touches no database.
    package func verify(signedPayload: String) async throws -> VerifiedNotification {
        try await verified(try await verifier.verifyNotification(signedPayload))
    }

    /// Takes a notification whose signature and chain were verified before its app was known
    /// (``NotificationRouter``) as this app's, and verifies everything signed inside it.
    func verify(_ unrouted: SignedDataVerifier.UnroutedNotification) async throws -> VerifiedNotification {
        try await verified(try verifier.accept(unrouted))
    }

    private func verified(_ notification: Verified<ResponseBodyV2DecodedPayload>) async throws -> VerifiedNotification {
        let subscription = try await verifier.verifySubscription(
            signedTransactionInfo: notification.payload.data?.signedTransactionInfo, signedRenewalInfo: notification.payload.data?.signedRenewalInfo)
        return VerifiedNotification(notification: notification, subscription: subscription)
    }

    /// Applies verified notifications in one transaction of their own (as a replayed page is); with
    /// `forwarding`, those recorded for the first time are queued for the app's webhook too.
    package func record(
        _ notifications: [VerifiedNotification], source: NotificationLog.Source, forwarding: NotificationLog.Forwarding? = nil
    ) async throws -> [HandlingResult] {
        try await database.storeHeaders(of: notifications.flatMap(\.signedParts))
        return try await database.transaction { transaction in
            try await apply(notifications, source: source, forwarding: forwarding, on: transaction)
        }
    }

    /// Whether the database behind the store answers, for health checks.
    package func isStoreReachable() async -> Bool {
        await database.isReachable()
    }

    /// Verifies and applies one notification in its own transaction; with `forwarding`, a
    /// notification recorded for the first time is queued for the app's own webhook too.
    package func handle(
        signedPayload: String, source: NotificationLog.Source, forwarding: NotificationLog.Forwarding? = nil
    ) async throws -> HandlingResult {
        try await handle(try await verify(signedPayload: signedPayload), source: source, forwarding: forwarding)
    }

    /// Applies one verified notification in its own transaction (the live path once a
    /// ``NotificationRouter`` chose this app's handler).
    package func handle(
        _ notification: VerifiedNotification, source: NotificationLog.Source, forwarding: NotificationLog.Forwarding? = nil
    ) async throws -> HandlingResult {
        try await database.storeHeaders(of: notification.signedParts)
        return try await database.transaction { transaction in
            try await apply([notification], source: source, forwarding: forwarding, on: transaction)[0]
        }
    }

    /// Applies verified notifications inside the caller's transaction (a replayed page and its
    /// checkpoint commit together). Results come back in the order given.
    ///
    /// The page is applied set-wise: the purchases of its new notifications are locked, its
    /// purchases read, and the changed ones written once each. A
    /// notification is stale when its signedDate is older than what its purchase reflected before
    /// the page; several notifications of one purchase in a page leave the purchase exactly as
    /// applying them one by one would, because each part of a purchase keeps its newest version.
    func apply(
        _ notifications: [VerifiedNotification], source: NotificationLog.Source, forwarding: NotificationLog.Forwarding? = nil,
        on transaction: DatabaseTransaction
    ) async throws -> [HandlingResult] {
        guard !notifications.isEmpty else { return [] }
        var purchasesByNotification: [String: String] = [:]
        for notification in notifications where notification.appliesToPurchase {
            purchasesByNotification[notification.notificationUUID] = notification.originalTransactionId
        }
        let purchases = Set(purchasesByNotification.values)
        try await store.lock(
            purchases: [], notifications: notifications.map(\.notificationUUID), purchasesByNotification: purchasesByNotification, on: transaction)
        let before = try await store.purchaseStates(purchases, on: transaction)

        // One row per UUID; a UUID repeated within the page is a duplicate of its first copy.
        var seen = Set<String>()
        var rows: [NotificationLog.NotificationRow] = []
        for notification in notifications where seen.insert(notification.notificationUUID).inserted {
            rows.append(.init(notification: notification, outcome: outcome(of: notification, before: before)))
        }
        let inserted = try await store.notifications.insert(rows, source: source, forwarding: forwarding, on: transaction)

        var transactions: [PurchaseStore.TransactionWrite] = []
        var updates: [PurchaseStore.PurchaseUpdate] = []
        var origin = PurchaseStore.ChangeOrigin(source: source.runId == nil ? .webhook : .history, runId: source.runId)
        var newestSigned: [String: (withoutDeadline: Int, signedDate: Int64)] = [:]
        for row in rows where inserted.contains(row.notification.notificationUUID) {
            let notification = row.notification
            guard notification.appliesToPurchase, let original = notification.originalTransactionId else { continue }
            // The feed names the newest notification behind a purchase's change; one without a
            // deadline first, since one with a deadline gets a notification row of its own.
            let rank = (withoutDeadline: notification.respondBy == nil ? 1 : 0, signedDate: notification.signedDate)
            if newestSigned[original].map({ rank >= $0 }) ?? true {
                newestSigned[original] = rank
                origin.notifications[original] = .init(
                    notificationUUID: notification.notificationUUID, notificationType: notification.notificationType.rawValue,
                    subtype: notification.subtype?.rawValue)
            }
            if let transaction = notification.subscription.transaction {
                // Apple removes the revocation from a reversed refund's transaction; make sure of it.
                // Stored once, inside the notification recorded with it.
                transactions.append(
                    .init(
                        transaction, clearsRevocation: notification.rule.clearsRevocation, fromNotification: true,
                        signedInNotification: notification.notificationUUID))
            }
            updates.append(
                .init(
                    originalTransactionId: original, renewalInfo: notification.subscription.renewalInfo,
                    notification: .init(
                        notificationUUID: notification.notificationUUID, signedDate: notification.signedDate,
                        status: notification.payload.data?.status)))
        }
        // Every notification recorded for the first time reaches the feed: named by the purchase row
        // of the change it made, or in a row of its own (and one with a deadline always in its own).
        let changes = try await store.write(
            transactions: transactions, updates: updates, before: before, origin: origin,
            events: { [origin] changes in
                let named = Set(changes.filter(\.value.changesPurchase).keys.compactMap { origin.notifications[$0]?.notificationUUID })
                return rows.map(\.notification).filter {
                    inserted.contains($0.notificationUUID) && (!named.contains($0.notificationUUID) || $0.respondBy != nil)
                }
                .map(\.feedRow)
            }, on: transaction)

        // Applied counts the notifications whose purchase changed (as the feed counts a change:
        // entitled and lastSignedDate aside); one whose data changed nothing is recorded only.
        let changed = Set(changes.filter(\.value.changesPurchase).keys)
        let outcomes = Dictionary(
            rows.filter { inserted.contains($0.notification.notificationUUID) }.map { row in
                let purchaseChanged = row.notification.originalTransactionId.map(changed.contains) ?? false
                return (row.notification.notificationUUID, row.outcome == .applied && !purchaseChanged ? .recorded : row.outcome)
            }, uniquingKeysWith: { first, _ in first })
        try await store.notifications.markRecordedOnly(
            rows.filter { $0.outcome == .applied && outcomes[$0.notification.notificationUUID] == .recorded }.map(\.notification.notificationUUID),
            on: transaction)

        var recorded = Set<String>()
        return notifications.map { notification in
            let first = recorded.insert(notification.notificationUUID).inserted
            let isNew = first && inserted.contains(notification.notificationUUID)
            return HandlingResult(
                notificationUUID: notification.notificationUUID, typeAndSubtype: notification.typeAndSubtype,
                originalTransactionId: notification.originalTransactionId,
                outcome: isNew ? outcomes[notification.notificationUUID] ?? .duplicate : .duplicate,
                change: isNew ? notification.originalTransactionId.flatMap { changes[$0] } : nil)
        }
    }

    /// How a notification is recorded before its data is applied: `applied` may still become
    /// `recorded` when it changed no purchase (``apply(_:source:forwarding:on:)``).
    private func outcome(of notification: VerifiedNotification, before: [String: PurchaseState]) -> HandlingResult.Outcome {
        guard notification.appliesToPurchase, let original = notification.originalTransactionId else { return .recorded }
        return (before[original]?.lastSignedDate ?? Int64.min) > notification.signedDate ? .stale : .applied
    }
}

extension VerifiedNotification {
    /// Whether it carries purchase data to apply (TEST notifications and summaries do not).
    var appliesToPurchase: Bool { originalTransactionId != nil && rule.appliesToPurchase }

    /// Its row of kind `notification` in the change feed.
    var feedRow: PurchaseStore.NotificationFeedRow {
        PurchaseStore.NotificationFeedRow(
            notificationUUID: notificationUUID, notificationType: notificationType.rawValue, subtype: subtype?.rawValue,
            originalTransactionId: originalTransactionId, transactionId: transaction?.transactionId,
            appAccountToken: transaction?.appAccountToken ?? renewalInfo?.appAccountToken, signedDate: signedDate, respondBy: respondBy)
    }
}
