import AppStoreServer
import Logging
import PostgresNIO

/// The SQL that writes verified App Store data and reads purchase state. Every write method
/// runs on a connection the caller holds inside a transaction, so notifications, their
/// transactions and the purchases they change are committed together (or not at all).
///
/// Writes are set-based (one statement per kind of row for a whole page) because phase 1 applies
/// pages of 20 notifications and PostgreSQL round trips, not CPU, bound its speed.
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

    /// What to move forward on one purchase after its transactions are stored.
    public struct PurchaseUpdate: Sendable {
        public var originalTransactionId: String
        public var environment: String
        public var renewalInfo: JWSRenewalInfoDecodedPayload?
        public var notification: NotificationFacts?
        public var status: StatusFact?

        public init(originalTransactionId: String, environment: String, renewalInfo: JWSRenewalInfoDecodedPayload? = nil,
                    notification: NotificationFacts? = nil, status: StatusFact? = nil) {
            self.originalTransactionId = originalTransactionId
            self.environment = environment
            self.renewalInfo = renewalInfo
            self.notification = notification
            self.status = status
        }

        /// Combines two updates of the same purchase: each part keeps its newest version.
        func merged(with other: PurchaseUpdate) -> PurchaseUpdate {
            var result = self
            if let renewal = other.renewalInfo, (renewal.signedDate ?? .min) >= (renewalInfo?.signedDate ?? .min) { result.renewalInfo = renewal }
            if let facts = other.notification {
                if facts.signedDate >= (notification?.signedDate ?? .min) {
                    result.notification = NotificationFacts(
                        notificationUUID: facts.notificationUUID, signedDate: facts.signedDate,
                        status: facts.status ?? (notification?.signedDate == facts.signedDate ? notification?.status : nil))
                }
            }
            if let status = other.status, status.signedDate >= (self.status?.signedDate ?? .min) { result.status = status }
            return result
        }
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

    /// A notification to record, with the outcome to record it under.
    public struct NotificationRow: Sendable {
        public var notification: VerifiedNotification
        public var outcome: String
    }

    /// Records notifications; returns the UUIDs that were new (the others are duplicates).
    public func insertNotifications(_ rows: [NotificationRow], source: Source, on connection: PostgresConnection) async throws -> Set<String> {
        guard !rows.isEmpty else { return [] }
        let n = rows.map(\.notification)
        let result = try await connection.query("""
            INSERT INTO notifications (notification_uuid, notification_type, subtype, signed_date_ms, environment,
                original_transaction_id, transaction_id, signed_payload, source, run_id, outcome)
            SELECT uuid, type, NULLIF(subtype, ''), signed, environment, NULLIF(original, ''), NULLIF(transaction, ''), payload,
                \(source.name), \(source.runId), outcome
            FROM unnest(\(n.map(\.notificationUUID))::text[], \(n.map(\.notificationType.rawValue))::text[],
                        \(n.map { $0.subtype?.rawValue ?? "" })::text[], \(n.map(\.signedDate))::bigint[], \(n.map(\.environment))::text[],
                        \(n.map { $0.originalTransactionId ?? "" })::text[], \(n.map { $0.transaction?.transactionId ?? "" })::text[],
                        \(n.map(\.signedPayload))::text[], \(rows.map(\.outcome))::text[])
                AS incoming (uuid, type, subtype, signed, environment, original, transaction, payload, outcome)
            ON CONFLICT (notification_uuid) DO NOTHING
            RETURNING notification_uuid
            """, logger: logger)
        var inserted = Set<String>()
        for try await uuid in result.decode(String.self) { inserted.insert(uuid) }
        return inserted
    }

    // MARK: Transactions

    /// Stores transactions, each unless a version signed later is already stored. Several
    /// versions of one transaction in the batch: the newest signed one is kept.
    public func upsertTransactions(_ transactions: [(payload: JWSTransactionDecodedPayload, jws: String)], on connection: PostgresConnection) async throws {
        var newest: [String: (payload: JWSTransactionDecodedPayload, jws: String)] = [:]
        for transaction in transactions {
            let id = transaction.payload.transactionId ?? ""
            if let kept = newest[id], (kept.payload.signedDate ?? .min) > (transaction.payload.signedDate ?? .min) { continue }
            newest[id] = transaction
        }
        guard !newest.isEmpty else { return }
        let t = newest.keys.sorted().map { newest[$0]!.payload }
        let jws = newest.keys.sorted().map { newest[$0]!.jws }
        // Optional integers travel as text ('' for absent): postgres-nio binds no arrays of optionals.
        func text<T>(_ values: [T?]) -> [String] { values.map { $0.map { "\($0)" } ?? "" } }
        try await connection.query("""
            INSERT INTO transactions AS stored (transaction_id, original_transaction_id, environment, bundle_id, product_id,
                product_type, subscription_group_identifier, web_order_line_item_id, in_app_ownership_type, transaction_reason,
                purchase_date_ms, original_purchase_date_ms, expires_date_ms, quantity, is_upgraded, offer_type, offer_identifier,
                storefront, currency, price, app_account_token, revocation_date_ms, revocation_reason, revocation_type,
                revocation_percentage, signed_date_ms, signed_transaction_info)
            SELECT id, original, environment, bundle, NULLIF(product, ''), NULLIF(type, ''), NULLIF("group", ''), NULLIF(line, ''),
                NULLIF(ownership, ''), NULLIF(reason, ''), NULLIF(purchase, '')::bigint, NULLIF(original_purchase, '')::bigint,
                NULLIF(expires, '')::bigint, NULLIF(quantity, '')::integer, upgraded, NULLIF(offer_type, '')::integer, NULLIF(offer, ''),
                NULLIF(storefront, ''), NULLIF(currency, ''), NULLIF(price, '')::bigint, NULLIF(token, ''),
                NULLIF(revoked, '')::bigint, NULLIF(revocation_reason, '')::integer, NULLIF(revocation_type, ''),
                NULLIF(percentage, '')::integer, signed, jws
            FROM unnest(\(t.map { $0.transactionId ?? "" })::text[], \(t.map { $0.originalTransactionId ?? "" })::text[],
                        \(t.map { $0.environment?.rawValue ?? "" })::text[], \(t.map { $0.bundleId ?? "" })::text[],
                        \(text(t.map(\.productId)))::text[], \(text(t.map(\.type?.rawValue)))::text[],
                        \(text(t.map(\.subscriptionGroupIdentifier)))::text[], \(text(t.map(\.webOrderLineItemId)))::text[],
                        \(text(t.map(\.inAppOwnershipType?.rawValue)))::text[], \(text(t.map(\.transactionReason?.rawValue)))::text[],
                        \(text(t.map(\.purchaseDate)))::text[], \(text(t.map(\.originalPurchaseDate)))::text[],
                        \(text(t.map(\.expiresDate)))::text[], \(text(t.map(\.quantity)))::text[], \(t.map { $0.isUpgraded ?? false })::boolean[],
                        \(text(t.map(\.offerType?.rawValue)))::text[], \(text(t.map(\.offerIdentifier)))::text[],
                        \(text(t.map(\.storefront)))::text[], \(text(t.map(\.currency)))::text[], \(text(t.map(\.price)))::text[],
                        \(text(t.map(\.appAccountToken)))::text[], \(text(t.map(\.revocationDate)))::text[],
                        \(text(t.map(\.revocationReason?.rawValue)))::text[], \(text(t.map(\.revocationType?.rawValue)))::text[],
                        \(text(t.map(\.revocationPercentage)))::text[], \(t.map { $0.signedDate ?? 0 })::bigint[], \(jws)::text[])
                AS incoming (id, original, environment, bundle, product, type, "group", line, ownership, reason, purchase,
                             original_purchase, expires, quantity, upgraded, offer_type, offer, storefront, currency, price, token,
                             revoked, revocation_reason, revocation_type, percentage, signed, jws)
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
            """, logger: logger)
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

    /// The stored state of some purchases, by originalTransactionId.
    public func purchaseStates(_ originalTransactionIds: some Collection<String>, on connection: PostgresConnection) async throws -> [String: PurchaseState] {
        guard !originalTransactionIds.isEmpty else { return [:] }
        let rows = try await connection.query(
            "SELECT \(unescaped: Self.purchaseColumns) FROM purchases WHERE original_transaction_id = ANY(\(Array(originalTransactionIds))::text[])",
            logger: logger)
        var result: [String: PurchaseState] = [:]
        for try await row in rows.decode(PurchaseRow.self) { result[row.0] = Self.purchaseState(row) }
        return result
    }

    /// The stored state of one purchase.
    public func purchaseState(originalTransactionId: String, on connection: PostgresConnection) async throws -> PurchaseState? {
        try await purchaseStates([originalTransactionId], on: connection)[originalTransactionId]
    }

    /// Recomputes purchases from their stored transactions (the latest one: not upgraded, newest
    /// purchaseDate) and moves their renewal, status and notification parts forward where the
    /// new data is not older than what is stored; returns the new states.
    public func refreshPurchases(_ updates: [PurchaseUpdate], on connection: PostgresConnection) async throws -> [String: PurchaseState] {
        var merged: [String: PurchaseUpdate] = [:]
        for update in updates {
            merged[update.originalTransactionId] = merged[update.originalTransactionId].map { $0.merged(with: update) } ?? update
        }
        guard !merged.isEmpty else { return [:] }
        let u = merged.keys.sorted().map { merged[$0]! }
        func text<T>(_ values: [T?]) -> [String] { values.map { $0.map { "\($0)" } ?? "" } }
        let statuses = u.map { $0.status?.status.rawValue ?? $0.notification?.status?.rawValue }
        let statusDates = u.map { $0.status?.signedDate ?? ($0.notification?.status == nil ? nil : $0.notification?.signedDate) }
        let rows = try await connection.query("""
            INSERT INTO purchases AS p (original_transaction_id, environment, product_id, product_type, latest_transaction_id,
                purchase_date_ms, expires_date_ms, revocation_date_ms, revocation_reason,
                auto_renew_status, auto_renew_product_id, expiration_intent, is_in_billing_retry_period,
                grace_period_expires_date_ms, renewal_date_ms, renewal_signed_date_ms,
                status, status_signed_date_ms, last_signed_date_ms, last_notification_uuid)
            SELECT u.id, u.environment, l.product_id, l.product_type, l.transaction_id,
                l.purchase_date_ms, l.expires_date_ms, l.revocation_date_ms, l.revocation_reason,
                NULLIF(u.auto_renew, '')::integer, NULLIF(u.auto_renew_product, ''), NULLIF(u.intent, '')::integer,
                NULLIF(u.retrying, '')::boolean, NULLIF(u.grace, '')::bigint, NULLIF(u.renewal, '')::bigint,
                NULLIF(u.renewal_signed, '')::bigint, NULLIF(u.status, '')::integer, NULLIF(u.status_signed, '')::bigint,
                NULLIF(u.last_signed, '')::bigint, NULLIF(u.last_uuid, '')
            FROM unnest(\(u.map(\.originalTransactionId))::text[], \(u.map(\.environment))::text[],
                        \(text(u.map(\.renewalInfo?.autoRenewStatus?.rawValue)))::text[], \(text(u.map(\.renewalInfo?.autoRenewProductId)))::text[],
                        \(text(u.map(\.renewalInfo?.expirationIntent?.rawValue)))::text[], \(text(u.map(\.renewalInfo?.isInBillingRetryPeriod)))::text[],
                        \(text(u.map(\.renewalInfo?.gracePeriodExpiresDate)))::text[], \(text(u.map(\.renewalInfo?.renewalDate)))::text[],
                        \(text(u.map(\.renewalInfo?.signedDate)))::text[], \(text(statuses))::text[], \(text(statusDates))::text[],
                        \(text(u.map(\.notification?.signedDate)))::text[], \(text(u.map(\.notification?.notificationUUID)))::text[])
                AS u (id, environment, auto_renew, auto_renew_product, intent, retrying, grace, renewal, renewal_signed, status,
                      status_signed, last_signed, last_uuid)
            LEFT JOIN LATERAL (
                SELECT transaction_id, product_id, product_type, purchase_date_ms, expires_date_ms, revocation_date_ms, revocation_reason
                FROM transactions WHERE original_transaction_id = u.id
                ORDER BY is_upgraded, purchase_date_ms DESC NULLS LAST, transaction_id DESC
                LIMIT 1
            ) AS l ON true
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
        var result: [String: PurchaseState] = [:]
        for try await row in rows.decode(PurchaseRow.self) { result[row.0] = Self.purchaseState(row) }
        return result
    }

    /// Applies verified signed data to purchases (the caller holds their locks) and returns each
    /// purchase's state before and after. The one apply path for live notifications, replays and
    /// gap fill.
    public func apply(
        transactions: [(payload: JWSTransactionDecodedPayload, jws: String)], updates: [PurchaseUpdate],
        before: [String: PurchaseState], on connection: PostgresConnection
    ) async throws -> [String: PurchaseChange] {
        try await upsertTransactions(transactions, on: connection)
        let after = try await refreshPurchases(updates, on: connection)
        return after.mapValues { PurchaseChange(before: before[$0.originalTransactionId], after: $0) }
    }

    /// Every purchase, ordered by originalTransactionId, optionally of one environment.
    public func exportPurchases(environment: String?, on client: PostgresClient, _ body: (PurchaseState) throws -> Void) async throws {
        let rows = try await client.query(
            "SELECT \(unescaped: Self.purchaseColumns) FROM purchases WHERE \(environment)::text IS NULL OR environment = \(environment) ORDER BY original_transaction_id",
            logger: logger)
        for try await row in rows.decode(PurchaseRow.self) { try body(Self.purchaseState(row)) }
    }

    /// The signedDate of the newest notification the live webhook stored, for `run --since-last`.
    public func newestLiveNotification(environment: String, on client: PostgresClient) async throws -> Int64? {
        let rows = try await client.query("""
            SELECT max(signed_date_ms) FROM notifications WHERE source = 'webhook' AND environment = \(environment)
            """, logger: logger)
        for try await value in rows.decode(Int64?.self) { return value }
        return nil
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
