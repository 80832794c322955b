import AppStoreServer
import Logging
import PostgresNIO

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
/// let handler = NotificationHandler(verifier: verifier, database: database)
/// let result = try await handler.handle(signedPayload: body.signedPayload, source: .webhook)
/// ```
public struct NotificationHandler: Sendable {
    public let verifier: SignedDataVerifier
    public let database: Database
    public let store: PurchaseStore

    public init(verifier: SignedDataVerifier, database: Database) {
        self.verifier = verifier
        self.database = database
        self.store = PurchaseStore(logger: database.logger)
    }

    /// Verifies a notification and everything signed inside it. Touches no database.
    public func verify(signedPayload: String) async throws -> VerifiedNotification {
        let payload = try await verifier.verifyAndDecodeNotification(signedPayload)
        var transaction: JWSTransactionDecodedPayload?
        var renewalInfo: JWSRenewalInfoDecodedPayload?
        if let signed = payload.data?.signedTransactionInfo {
            transaction = try await verifier.verifyAndDecodeTransaction(signed)
        }
        if let signed = payload.data?.signedRenewalInfo {
            renewalInfo = try await verifier.verifyAndDecodeRenewalInfo(signed)
        }
        if let transaction, let renewalInfo, transaction.originalTransactionId != renewalInfo.originalTransactionId {
            throw VerificationError(.invalidPayload, "the transaction and renewal info name different originalTransactionIds")
        }
        return VerifiedNotification(
            signedPayload: signedPayload, payload: payload, transaction: transaction,
            signedTransactionInfo: payload.data?.signedTransactionInfo, renewalInfo: renewalInfo,
            environment: verifier.configuration.environment.rawValue)
    }

    /// Verifies and applies one notification in its own transaction. With `dryRun` the
    /// transaction is rolled back, so the result says what would have happened.
    public func handle(signedPayload: String, source: PurchaseStore.Source, dryRun: Bool = false) async throws -> HandlingResult {
        let notification = try await verify(signedPayload: signedPayload)
        return try await database.transaction(rollback: dryRun) { connection in
            try await apply([notification], source: source, on: connection)[0]
        }
    }

    /// Applies verified notifications inside the caller's transaction (a replayed page and its
    /// checkpoint commit together). Results come back in the order given.
    public func apply(
        _ notifications: [VerifiedNotification], source: PurchaseStore.Source, on connection: PostgresConnection
    ) async throws -> [HandlingResult] {
        try await store.lockPurchases(notifications.map { $0.originalTransactionId ?? "notification:\($0.notificationUUID)" }, on: connection)
        var results: [HandlingResult] = []
        results.reserveCapacity(notifications.count)
        for notification in notifications {
            results.append(try await apply(notification, source: source, on: connection))
        }
        return results
    }

    private func apply(_ notification: VerifiedNotification, source: PurchaseStore.Source, on connection: PostgresConnection) async throws -> HandlingResult {
        var result = HandlingResult(
            notificationUUID: notification.notificationUUID, typeAndSubtype: notification.typeAndSubtype,
            originalTransactionId: notification.originalTransactionId, outcome: .recorded, change: nil)
        guard let originalTransactionId = notification.originalTransactionId,
              notification.notificationType != .test
        else {
            let inserted = try await store.insertNotification(notification, source: source, outcome: "recorded", on: connection)
            result.outcome = inserted ? .recorded : .duplicate
            return result
        }
        let before = try await store.purchaseState(originalTransactionId: originalTransactionId, on: connection)
        let isStale = (before?.lastSignedDate ?? Int64.min) > notification.signedDate
        let outcome: HandlingResult.Outcome = isStale ? .stale : .applied
        guard try await store.insertNotification(notification, source: source, outcome: outcome.rawValue, on: connection) else {
            result.outcome = .duplicate
            return result
        }
        var transaction = notification.transaction.flatMap { payload in notification.signedTransactionInfo.map { (payload, $0) } }
        if notification.notificationType == .refundReversed {
            // Apple removes the revocation from a reversed refund's transaction; make sure of it.
            transaction?.0.revocationDate = nil
            transaction?.0.revocationReason = nil
            transaction?.0.revocationType = nil
            transaction?.0.revocationPercentage = nil
        }
        result.change = try await store.apply(
            originalTransactionId: originalTransactionId, environment: notification.environment,
            transaction: transaction, renewalInfo: notification.renewalInfo,
            notification: .init(notificationUUID: notification.notificationUUID, signedDate: notification.signedDate,
                                status: notification.payload.data?.status),
            before: before, on: connection)
        result.outcome = outcome
        return result
    }
}
