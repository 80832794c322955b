import AppStoreServer
import Logging
import PostgresNIO

/// The SQL that writes verified App Store data and reads purchase state. Every write method
/// runs on a connection the caller holds inside a transaction, so a notification, its
/// transaction and the purchase it changes are committed together (or not at all).
///
/// Only parameterised SQL: every value is a bind parameter.
public struct PurchaseStore: Sendable {
    public let logger: Logger

    public init(logger: Logger) {
        self.logger = logger
    }

    /// Where a notification came from.
    public enum Source: Sendable, Hashable {
        case webhook
        /// Replayed from Get Notification History by a reconcile run.
        case history(runId: Int64)

        var name: String {
            switch self {
            case .webhook: "webhook"
            case .history: "history"
            }
        }

        var runId: Int64? {
            switch self {
            case .webhook: nil
            case .history(let runId): runId
            }
        }
    }

    /// What a notification contributes to its purchase beyond its transaction and renewal info.
    public struct NotificationFacts: Sendable {
        public var notificationUUID: String
        public var signedDate: Int64
        public var status: Status?
    }

    /// A status read from Get All Subscription Statuses, as of its renewal info's signedDate.
    public struct StatusFact: Sendable {
        public var status: Status
        public var signedDate: Int64
    }

    // MARK: Locks

    /// Serialises all writers of the same purchases until the transaction ends. Keys are locked
    /// in one sorted order, so two transactions locking overlapping sets cannot deadlock.
    public func lockPurchases(_ keys: some Collection<String>, on connection: PostgresConnection) async throws {
        guard !keys.isEmpty else { return }
        let keys = Array(Set(keys))
        let rows = try await connection.query("""
            SELECT pg_advisory_xact_lock(727002, k)::text
            FROM (SELECT DISTINCT hashtext(key) AS k FROM unnest(\(keys)::text[]) AS key ORDER BY 1) AS sorted_keys
            """, logger: logger)
        for try await _ in rows {}
    }

    // MARK: Notifications

    /// Records a notification; `false` when its UUID is already recorded (a duplicate).
    public func insertNotification(
        _ notification: VerifiedNotification, source: Source, outcome: String, on connection: PostgresConnection
    ) async throws -> Bool {
        let rows = try await connection.query("""
            INSERT INTO notifications (notification_uuid, notification_type, subtype, signed_date_ms, environment,
                original_transaction_id, transaction_id, signed_payload, source, run_id, outcome)
            VALUES (\(notification.notificationUUID), \(notification.notificationType.rawValue), \(notification.subtype?.rawValue),
                \(notification.signedDate), \(notification.environment), \(notification.originalTransactionId),
                \(notification.transaction?.transactionId), \(notification.signedPayload), \(source.name), \(source.runId), \(outcome))
            ON CONFLICT (notification_uuid) DO NOTHING
            RETURNING 1
            """, logger: logger)
        var inserted = false
        for try await _ in rows { inserted = true }
        return inserted
    }

    /// Whether these notifications are recorded already, by UUID.
    public func recordedNotificationUUIDs(_ uuids: [String], on connection: PostgresConnection) async throws -> Set<String> {
        guard !uuids.isEmpty else { return [] }
        let rows = try await connection.query(
            "SELECT notification_uuid FROM notifications WHERE notification_uuid = ANY(\(uuids)::text[])", logger: logger)
        var result = Set<String>()
        for try await uuid in rows.decode(String.self) { result.insert(uuid) }
        return result
    }

    // MARK: Transactions

    /// Stores a transaction unless a version signed later is already stored; `true` when written.
    @discardableResult
    public func upsertTransaction(
        _ transaction: JWSTransactionDecodedPayload, signedTransactionInfo: String, on connection: PostgresConnection
    ) async throws -> Bool {
        let t = transaction
        let rows = try await connection.query("""
            INSERT INTO transactions AS stored (transaction_id, original_transaction_id, environment, bundle_id, product_id,
                product_type, subscription_group_identifier, web_order_line_item_id, in_app_ownership_type, transaction_reason,
                purchase_date_ms, original_purchase_date_ms, expires_date_ms, quantity, is_upgraded, offer_type, offer_identifier,
                storefront, currency, price, app_account_token, revocation_date_ms, revocation_reason, revocation_type,
                revocation_percentage, signed_date_ms, signed_transaction_info)
            VALUES (\(t.transactionId ?? ""), \(t.originalTransactionId ?? ""), \(t.environment?.rawValue ?? ""), \(t.bundleId ?? ""),
                \(t.productId), \(t.type?.rawValue), \(t.subscriptionGroupIdentifier), \(t.webOrderLineItemId),
                \(t.inAppOwnershipType?.rawValue), \(t.transactionReason?.rawValue), \(t.purchaseDate), \(t.originalPurchaseDate),
                \(t.expiresDate), \(t.quantity), \(t.isUpgraded ?? false), \(t.offerType?.rawValue), \(t.offerIdentifier),
                \(t.storefront), \(t.currency), \(t.price), \(t.appAccountToken), \(t.revocationDate), \(t.revocationReason?.rawValue),
                \(t.revocationType?.rawValue), \(t.revocationPercentage), \(t.signedDate ?? 0), \(signedTransactionInfo))
            ON CONFLICT (transaction_id) DO UPDATE SET
                original_transaction_id = EXCLUDED.original_transaction_id, environment = EXCLUDED.environment,
                bundle_id = EXCLUDED.bundle_id, product_id = EXCLUDED.product_id, product_type = EXCLUDED.product_type,
                subscription_group_identifier = EXCLUDED.subscription_group_identifier,
                web_order_line_item_id = EXCLUDED.web_order_line_item_id, in_app_ownership_type = EXCLUDED.in_app_ownership_type,
                transaction_reason = EXCLUDED.transaction_reason, purchase_date_ms = EXCLUDED.purchase_date_ms,
                original_purchase_date_ms = EXCLUDED.original_purchase_date_ms, expires_date_ms = EXCLUDED.expires_date_ms,
                quantity = EXCLUDED.quantity, is_upgraded = EXCLUDED.is_upgraded, offer_type = EXCLUDED.offer_type,
                offer_identifier = EXCLUDED.offer_identifier, storefront = EXCLUDED.storefront, currency = EXCLUDED.currency,
                price = EXCLUDED.price, app_account_token = EXCLUDED.app_account_token,
                revocation_date_ms = EXCLUDED.revocation_date_ms, revocation_reason = EXCLUDED.revocation_reason,
                revocation_type = EXCLUDED.revocation_type, revocation_percentage = EXCLUDED.revocation_percentage,
                signed_date_ms = EXCLUDED.signed_date_ms, signed_transaction_info = EXCLUDED.signed_transaction_info,
                updated_at = now()
            WHERE stored.signed_date_ms <= EXCLUDED.signed_date_ms
            RETURNING 1
            """, logger: logger)
        var written = false
        for try await _ in rows { written = true }
        return written
    }

    // MARK: Purchases

    static let purchaseColumns = """
        original_transaction_id, latest_transaction_id, product_id, environment, purchase_date_ms, expires_date_ms,
        revocation_date_ms, auto_renew_status, last_signed_date_ms
        """

    typealias PurchaseRow = (String, String?, String?, String?, Int64?, Int64?, Int64?, Int32?, Int64?)

    static func purchaseState(_ row: PurchaseRow) -> PurchaseState {
        PurchaseState(
            originalTransactionId: row.0, latestTransactionId: row.1, productId: row.2, environment: row.3,
            purchaseDate: row.4, expiresDate: row.5, revocationDate: row.6, autoRenewStatus: row.7, lastSignedDate: row.8)
    }

    /// The stored state of one purchase.
    public func purchaseState(originalTransactionId: String, on connection: PostgresConnection) async throws -> PurchaseState? {
        let rows = try await connection.query(
            "SELECT \(unescaped: Self.purchaseColumns) FROM purchases WHERE original_transaction_id = \(originalTransactionId)",
            logger: logger)
        for try await row in rows.decode(PurchaseRow.self) { return Self.purchaseState(row) }
        return nil
    }

    /// Recomputes a purchase from its stored transactions and moves its renewal, status and
    /// notification parts forward where the new data is not older; returns the new state.
    public func refreshPurchase(
        originalTransactionId: String, environment: String, renewalInfo: JWSRenewalInfoDecodedPayload?,
        notification: NotificationFacts?, status: StatusFact?, on connection: PostgresConnection
    ) async throws -> PurchaseState {
        let r = renewalInfo
        let statusValue = status?.status.rawValue ?? notification?.status?.rawValue
        let statusSignedDate = status?.signedDate ?? (notification?.status == nil ? nil : notification?.signedDate)
        let rows = try await connection.query("""
            WITH latest AS (
                SELECT transaction_id, product_id, product_type, purchase_date_ms, expires_date_ms, revocation_date_ms, revocation_reason
                FROM transactions WHERE original_transaction_id = \(originalTransactionId)
                ORDER BY is_upgraded, purchase_date_ms DESC NULLS LAST, transaction_id DESC
                LIMIT 1
            )
            INSERT INTO purchases AS p (original_transaction_id, environment, product_id, product_type, latest_transaction_id,
                purchase_date_ms, expires_date_ms, revocation_date_ms, revocation_reason,
                auto_renew_status, auto_renew_product_id, expiration_intent, is_in_billing_retry_period,
                grace_period_expires_date_ms, renewal_date_ms, renewal_signed_date_ms,
                status, status_signed_date_ms, last_signed_date_ms, last_notification_uuid)
            SELECT \(originalTransactionId), \(environment), l.product_id, l.product_type, l.transaction_id,
                l.purchase_date_ms, l.expires_date_ms, l.revocation_date_ms, l.revocation_reason,
                \(r?.autoRenewStatus?.rawValue), \(r?.autoRenewProductId), \(r?.expirationIntent?.rawValue), \(r?.isInBillingRetryPeriod),
                \(r?.gracePeriodExpiresDate), \(r?.renewalDate), \(r?.signedDate)::bigint,
                \(statusValue), \(statusSignedDate)::bigint, \(notification?.signedDate)::bigint, \(notification?.notificationUUID)
            FROM (VALUES (1)) AS one (x) LEFT JOIN latest AS l ON true
            ON CONFLICT (original_transaction_id) DO UPDATE SET
                product_id = CASE WHEN EXCLUDED.latest_transaction_id IS NULL THEN p.product_id ELSE EXCLUDED.product_id END,
                product_type = CASE WHEN EXCLUDED.latest_transaction_id IS NULL THEN p.product_type ELSE EXCLUDED.product_type END,
                latest_transaction_id = COALESCE(EXCLUDED.latest_transaction_id, p.latest_transaction_id),
                purchase_date_ms = CASE WHEN EXCLUDED.latest_transaction_id IS NULL THEN p.purchase_date_ms ELSE EXCLUDED.purchase_date_ms END,
                expires_date_ms = CASE WHEN EXCLUDED.latest_transaction_id IS NULL THEN p.expires_date_ms ELSE EXCLUDED.expires_date_ms END,
                revocation_date_ms = CASE WHEN EXCLUDED.latest_transaction_id IS NULL THEN p.revocation_date_ms ELSE EXCLUDED.revocation_date_ms END,
                revocation_reason = CASE WHEN EXCLUDED.latest_transaction_id IS NULL THEN p.revocation_reason ELSE EXCLUDED.revocation_reason END,
                auto_renew_status = CASE WHEN EXCLUDED.renewal_signed_date_ms >= COALESCE(p.renewal_signed_date_ms, -1)
                    THEN EXCLUDED.auto_renew_status ELSE p.auto_renew_status END,
                auto_renew_product_id = CASE WHEN EXCLUDED.renewal_signed_date_ms >= COALESCE(p.renewal_signed_date_ms, -1)
                    THEN EXCLUDED.auto_renew_product_id ELSE p.auto_renew_product_id END,
                expiration_intent = CASE WHEN EXCLUDED.renewal_signed_date_ms >= COALESCE(p.renewal_signed_date_ms, -1)
                    THEN EXCLUDED.expiration_intent ELSE p.expiration_intent END,
                is_in_billing_retry_period = CASE WHEN EXCLUDED.renewal_signed_date_ms >= COALESCE(p.renewal_signed_date_ms, -1)
                    THEN EXCLUDED.is_in_billing_retry_period ELSE p.is_in_billing_retry_period END,
                grace_period_expires_date_ms = CASE WHEN EXCLUDED.renewal_signed_date_ms >= COALESCE(p.renewal_signed_date_ms, -1)
                    THEN EXCLUDED.grace_period_expires_date_ms ELSE p.grace_period_expires_date_ms END,
                renewal_date_ms = CASE WHEN EXCLUDED.renewal_signed_date_ms >= COALESCE(p.renewal_signed_date_ms, -1)
                    THEN EXCLUDED.renewal_date_ms ELSE p.renewal_date_ms END,
                renewal_signed_date_ms = GREATEST(p.renewal_signed_date_ms, EXCLUDED.renewal_signed_date_ms),
                status = CASE WHEN EXCLUDED.status_signed_date_ms >= COALESCE(p.status_signed_date_ms, -1)
                    THEN EXCLUDED.status ELSE p.status END,
                status_signed_date_ms = GREATEST(p.status_signed_date_ms, EXCLUDED.status_signed_date_ms),
                last_notification_uuid = CASE WHEN EXCLUDED.last_signed_date_ms >= COALESCE(p.last_signed_date_ms, -1)
                    THEN EXCLUDED.last_notification_uuid ELSE p.last_notification_uuid END,
                last_signed_date_ms = GREATEST(p.last_signed_date_ms, EXCLUDED.last_signed_date_ms),
                updated_at = now()
            RETURNING \(unescaped: Self.purchaseColumns)
            """, logger: logger)
        for try await row in rows.decode(PurchaseRow.self) { return Self.purchaseState(row) }
        throw PurchaseStoreError(description: "the purchase \(originalTransactionId) was not written")
    }

    /// Applies verified signed data to one purchase (the caller holds its lock) and returns the
    /// state before and after. The one apply path for live notifications, replays and gap fill.
    public func apply(
        originalTransactionId: String, environment: String,
        transaction: (payload: JWSTransactionDecodedPayload, jws: String)?, renewalInfo: JWSRenewalInfoDecodedPayload?,
        notification: NotificationFacts?, status: StatusFact? = nil, before: PurchaseState?, on connection: PostgresConnection
    ) async throws -> PurchaseChange {
        if let transaction {
            try await upsertTransaction(transaction.payload, signedTransactionInfo: transaction.jws, on: connection)
        }
        let after = try await refreshPurchase(
            originalTransactionId: originalTransactionId, environment: environment, renewalInfo: renewalInfo,
            notification: notification, status: status, on: connection)
        return PurchaseChange(before: before, after: after)
    }

    /// Every purchase, ordered by originalTransactionId, optionally of one environment.
    public func exportPurchases(environment: String?, on client: PostgresClient, _ body: (PurchaseState) throws -> Void) async throws {
        let rows = try await client.query(
            "SELECT \(unescaped: Self.purchaseColumns) FROM purchases WHERE \(environment)::text IS NULL OR environment = \(environment) ORDER BY original_transaction_id",
            logger: logger)
        for try await row in rows.decode(PurchaseRow.self) { try body(Self.purchaseState(row)) }
    }
}

/// The state of a purchase before and after applying something to it.
public struct PurchaseChange: Sendable, Hashable, Codable {
    public var before: PurchaseState?
    public var after: PurchaseState

    public init(before: PurchaseState?, after: PurchaseState) {
        self.before = before
        self.after = after
    }

    /// Whether what `export` shows changed.
    public var isChange: Bool { before != after }
}

public struct PurchaseStoreError: Error, CustomStringConvertible, Sendable {
    public var description: String
}

extension PurchaseStore {
    /// The signedDate of the newest notification the live webhook stored, for `run --since-last`.
    public func newestLiveNotification(environment: String, on client: PostgresClient) async throws -> Int64? {
        let rows = try await client.query("""
            SELECT max(signed_date_ms) FROM notifications WHERE source = 'webhook' AND environment = \(environment)
            """, logger: logger)
        for try await value in rows.decode(Int64?.self) { return value }
        return nil
    }
}
