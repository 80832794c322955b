package import AppStoreServer
import Foundation
package import Logging
import PostgresNIO
package import ReconcilerDomain
package import ReconcilerShared

/// Moving purchases forward from what notifications and snapshots (Get Transaction History, Get
/// All Subscription Statuses) say, and reading their state back (`purchases`).
extension PurchaseStore {
    /// What a notification contributes to its purchase beyond its transaction and renewal info.
    package struct NotificationFacts: Sendable {
        package var notificationUUID: String
        package var signedDate: Int64
        package var status: Status?

        package init(notificationUUID: String, signedDate: Int64, status: Status? = nil) {
            self.notificationUUID = notificationUUID
            self.signedDate = signedDate
            self.status = status
        }
    }

    /// A status read from Get All Subscription Statuses, as of its renewal info's signedDate.
    package struct StatusFact: Sendable {
        package var status: Status
        package var signedDate: Int64

        package init(status: Status, signedDate: Int64) {
            self.status = status
            self.signedDate = signedDate
        }
    }

    /// How long after a notification a snapshot that disagrees with it is not believed yet.
    ///
    /// Apple signs a snapshot when it is read, so it always looks newer than a notification signed
    /// moments before, even when Apple's API has not caught up with the change the notification
    /// reported (a refund read a second later still unrevoked). Within this margin, where a
    /// snapshot and a notification disagree on a transaction's revocation, a subscription's status
    /// or its renewal info, the notification wins whichever arrived first, and the purchase is due
    /// for another read once the margin has passed (`recheck_at_ms`): a snapshot signed later than
    /// that is believed. The margin is the phase-2 queue's re-read margin.
    static var snapshotMargin: Duration { RunLedger.rereadMargin }
    static var snapshotMarginMilliseconds: Int64 { snapshotMargin.components.seconds * 1000 }

    /// What to move forward on one purchase after its transactions are stored.
    package struct PurchaseUpdate: Sendable {
        package var originalTransactionId: String
        package var renewalInfo: Verified<JWSRenewalInfoDecodedPayload>?
        package var notification: NotificationFacts?
        package var status: StatusFact?
        /// The renewal info came inside a notification, not from Get All Subscription Statuses.
        var renewalFromNotification: Bool
        /// The customer whose transaction history this update comes from (phase 2): a new purchase
        /// takes the `appUserId` of that customer's other purchases.
        package var historyAnchor: String?
        /// The app's own ID for the customer that `reconciler import` gives while it reads their
        /// history: every purchase the read writes takes it, so a new purchase is created with it
        /// and a changed one changes with it (one feed row, not a second one to set it). The
        /// customer's purchases the read does not write take it by
        /// ``PurchaseStore/assignAppUserId(_:toCustomer:origin:on:)``.
        package var appUserId: String?

        package init(
            originalTransactionId: String, renewalInfo: Verified<JWSRenewalInfoDecodedPayload>? = nil,
            notification: NotificationFacts? = nil, status: StatusFact? = nil
        ) {
            self.originalTransactionId = originalTransactionId
            self.renewalInfo = renewalInfo
            self.notification = notification
            self.status = status
            self.renewalFromNotification = notification != nil && renewalInfo != nil
        }

        /// Combines two updates of the same purchase: each part keeps its newest version.
        package func merged(with other: PurchaseUpdate) -> PurchaseUpdate {
            var result = self
            if let renewal = other.renewalInfo, (renewal.payload.signedDate ?? .min) >= (renewalInfo?.payload.signedDate ?? .min) {
                result.renewalInfo = renewal
                result.renewalFromNotification = other.renewalFromNotification
            }
            if let facts = other.notification {
                if facts.signedDate >= (notification?.signedDate ?? .min) {
                    result.notification = NotificationFacts(
                        notificationUUID: facts.notificationUUID, signedDate: facts.signedDate,
                        status: facts.status ?? (notification?.signedDate == facts.signedDate ? notification?.status : nil))
                }
            }
            if let status = other.status, status.signedDate >= (self.status?.signedDate ?? .min) { result.status = status }
            result.historyAnchor = historyAnchor ?? other.historyAnchor
            result.appUserId = appUserId ?? other.appUserId
            return result
        }
    }

    static let purchaseColumns = """
        original_transaction_id, latest_transaction_id, product_id, environment, purchase_date_ms, expires_date_ms,
        revocation_date_ms, auto_renew_status, last_signed_date_ms, app_account_token, status, product_type,
        grace_period_expires_date_ms, is_in_billing_retry_period, bundle_id, app_transaction_id, revocation_type, revocation_percentage,
        offer_type, offer_identifier, app_user_id
        """

    /// A purchase as `export` shows it, from a row that selects ``purchaseColumns``, `entitled` as of
    /// `now` (UNIX ms) by `policy` (this store's app's when `nil`).
    func purchaseState(
        _ row: PostgresRow, now: Timestamp = .now, policy: EntitlementPolicy? = nil
    ) throws -> PurchaseState {
        let columns = NamedColumns(row)
        let (productId, environment): (String?, AppStoreEnvironment?) = (try columns["product_id"], try columns["environment"])
        let (purchaseDate, expiresDate, revocationDate): (Int64?, Int64?, Int64?) = (
            try columns["purchase_date_ms"], try columns["expires_date_ms"], try columns["revocation_date_ms"]
        )
        let facts = Entitlement.Facts(
            productType: try columns["product_type"], productId: productId, environment: environment, purchaseDate: purchaseDate,
            expiresDate: expiresDate, revocationDate: revocationDate, gracePeriodExpiresDate: try columns["grace_period_expires_date_ms"],
            isInBillingRetryPeriod: try columns["is_in_billing_retry_period"])
        return PurchaseState(
            originalTransactionId: try columns["original_transaction_id"], latestTransactionId: try columns["latest_transaction_id"],
            productId: productId, bundleId: try columns["bundle_id"], environment: environment, purchaseDate: purchaseDate,
            expiresDate: expiresDate, revocationDate: revocationDate, autoRenewStatus: try columns["auto_renew_status"],
            lastSignedDate: try columns["last_signed_date_ms"], appAccountToken: try columns["app_account_token"], status: try columns["status"],
            entitled: Entitlement.isEntitled(facts, at: now, policy: policy ?? entitlement), appTransactionId: try columns["app_transaction_id"],
            revocationType: try columns["revocation_type"], revocationPercentage: try columns["revocation_percentage"],
            offerType: try columns["offer_type"], offerIdentifier: try columns["offer_identifier"], appUserId: try columns["app_user_id"])
    }

    /// The stored state of some purchases, by originalTransactionId.
    package func purchaseStates(
        _ originalTransactionIds: some Collection<String>, on transaction: DatabaseTransaction
    ) async throws -> [String: PurchaseState] {
        guard !originalTransactionIds.isEmpty else { return [:] }
        // One primary-key lookup per purchase (migration 0016: before it, until the table's first
        // ANALYZE, `= ANY(…)` could read the history anchor's index and filter every purchase of the app).
        let query = PurchaseStatesSQL.query(
            originalTransactionIds: Array(originalTransactionIds), bundleId: try bundleId, environment: try environment)
        let rows = try await transaction.query(query, preparedAs: PurchaseStatesSQL.self, logger: logger)
        var result: [String: PurchaseState] = [:]
        for try await row in rows {
            let state = try purchaseState(row)
            result[state.originalTransactionId] = state
        }
        return result
    }

    /// One incoming purchase update; the keys are the column names of the `incoming` record set.
    private struct PurchaseUpdateColumns: Encodable {
        var original_transaction_id: String
        var bundle_id: String
        var environment: String
        var auto_renew_status: Int32?
        var auto_renew_product_id: String?
        var expiration_intent: Int32?
        var is_in_billing_retry_period: Bool?
        var grace_period_expires_date_ms: Int64?
        var renewal_date_ms: Int64?
        var renewal_signed_date_ms: Int64?
        var status: Int32?
        var status_signed_date_ms: Int64?
        var last_signed_date_ms: Int64?
        var last_notification_uuid: String?
        var renewal_price: Int64?
        var renewal_currency: String?
        var price_increase_status: Int32?
        var eligible_win_back_offer_ids: [String]?
        var renewal_from_notification: Bool
        var status_from_notification: Bool
        var history_anchor: String?
        var app_user_id: String?

        init(_ update: PurchaseUpdate, of target: AppTarget) {
            original_transaction_id = update.originalTransactionId
            bundle_id = target.bundleId
            environment = target.environment.rawValue
            let renewal = update.renewalInfo?.payload
            auto_renew_status = renewal?.autoRenewStatus?.rawValue
            auto_renew_product_id = renewal?.autoRenewProductId
            expiration_intent = renewal?.expirationIntent?.rawValue
            is_in_billing_retry_period = renewal?.isInBillingRetryPeriod
            grace_period_expires_date_ms = renewal?.gracePeriodExpiresDate
            renewal_date_ms = renewal?.renewalDate
            renewal_signed_date_ms = renewal?.signedDate
            renewal_price = renewal?.renewalPrice
            renewal_currency = renewal?.currency
            price_increase_status = renewal?.priceIncreaseStatus?.rawValue
            eligible_win_back_offer_ids = renewal?.eligibleWinBackOfferIds
            renewal_from_notification = update.renewalFromNotification
            status_from_notification = false
            history_anchor = update.historyAnchor
            app_user_id = update.appUserId
            // A status from Get All Subscription Statuses, else the one a notification carried.
            if let fact = update.status {
                status = fact.status.rawValue
                status_signed_date_ms = fact.signedDate
            } else if let notification = update.notification, let carried = notification.status {
                status = carried.rawValue
                status_signed_date_ms = notification.signedDate
                status_from_notification = true
            }
            last_signed_date_ms = update.notification?.signedDate
            last_notification_uuid = update.notification?.notificationUUID
        }

        static let definitions = """
            original_transaction_id text, bundle_id text, environment text, auto_renew_status integer, auto_renew_product_id text,
            expiration_intent integer, is_in_billing_retry_period boolean, grace_period_expires_date_ms bigint,
            renewal_date_ms bigint, renewal_signed_date_ms bigint, status integer, status_signed_date_ms bigint,
            last_signed_date_ms bigint, last_notification_uuid text, renewal_price bigint, renewal_currency text,
            price_increase_status integer, eligible_win_back_offer_ids jsonb, renewal_from_notification boolean,
            status_from_notification boolean, history_anchor text, app_user_id text
            """
    }

    /// Columns taken from the purchase's latest transaction, kept when it has none stored yet.
    static let latestTransactionColumns = [
        "product_id", "product_type", "purchase_date_ms", "expires_date_ms", "revocation_date_ms", "revocation_reason", "app_account_token",
        "app_transaction_id", "revocation_type", "revocation_percentage", "offer_type", "offer_identifier",
    ]
    /// Columns taken from the newest signed renewal info.
    static let renewalColumns = [
        "auto_renew_status", "auto_renew_product_id", "expiration_intent", "is_in_billing_retry_period", "grace_period_expires_date_ms",
        "renewal_date_ms", "renewal_price", "renewal_currency", "price_increase_status", "eligible_win_back_offer_ids",
    ]

    /// Whether the incoming renewal info (or status) disagrees with the stored one within
    /// ``snapshotMargin``, one from a notification and the other from a snapshot; `columns` are
    /// what counts as disagreeing.
    private static func disagreement(signed: String, fromNotification: String, columns: [String]) -> String {
        let stored = columns.map { "p.\($0)" }.joined(separator: ", ")
        let incoming = columns.map { "EXCLUDED.\($0)" }.joined(separator: ", ")
        return """
            (p.\(fromNotification) <> EXCLUDED.\(fromNotification) AND abs(p.\(signed) - EXCLUDED.\(signed)) <= \(snapshotMarginMilliseconds)
             AND ROW(\(stored)) IS DISTINCT FROM ROW(\(incoming)))
            """
    }

    /// Whether the incoming part wins: the newer one, except that a notification wins a disagreement
    /// with a snapshot within ``snapshotMargin`` (see ``snapshotMargin``).
    private static func wins(signed: String, fromNotification: String, columns: [String]) -> String {
        """
        (CASE WHEN \(disagreement(signed: signed, fromNotification: fromNotification, columns: columns))
              THEN EXCLUDED.\(fromNotification) ELSE EXCLUDED.\(signed) >= COALESCE(p.\(signed), -1) END)
        """
    }

    /// When to read the purchase again after such a disagreement: once the notification is older than the margin.
    private static func recheck(signed: String, fromNotification: String, columns: [String]) -> String {
        """
        CASE WHEN \(disagreement(signed: signed, fromNotification: fromNotification, columns: columns))
             THEN (CASE WHEN EXCLUDED.\(fromNotification) THEN EXCLUDED.\(signed) ELSE p.\(signed) END) + \(snapshotMarginMilliseconds) + 1 END
        """
    }

    /// What a renewal info's disagreement is about.
    static let renewalDisagreementColumns = [
        "auto_renew_status", "auto_renew_product_id", "expiration_intent", "is_in_billing_retry_period", "grace_period_expires_date_ms",
    ]

    /// The `appUserId` a purchase is written with when it has none: the one an import gives
    /// (``PurchaseUpdate/appUserId``), else the newest one given to another purchase of the
    /// customer: one with the same `appTransactionId` (Apple's one ID of the customer for the app),
    /// else one of the same transaction history. The history (`c.anchor`) is the one phase 2 reads
    /// (``PurchaseUpdate/historyAnchor``), else the one the stored purchase was linked to, else the
    /// purchase's own (an import may have read the customer from it); in phase 2 it also holds the
    /// other purchases of the same page (one customer's), which an earlier read may have linked to
    /// another anchor. So every writer (the live webhook, a run's replay and phase 2, the app API)
    /// applies the same rule, with or without an `appTransactionId` in what it writes. The probes
    /// read partial indexes of the purchases that have one (migration 0023), the history anchor's
    /// (0016) and the key; a purchase that has one keeps it, unless an import gives another.
    static let inheritedAppUserId = """
        COALESCE(
            u.app_user_id, c.app_user_id,
            (SELECT q.app_user_id FROM purchases q
             WHERE q.bundle_id = u.bundle_id AND q.environment = u.environment AND q.app_user_id IS NOT NULL
               AND q.app_transaction_id = l.app_transaction_id
             ORDER BY q.updated_at DESC LIMIT 1),
            (SELECT q.app_user_id FROM purchases q
             WHERE q.bundle_id = u.bundle_id AND q.environment = u.environment AND q.app_user_id IS NOT NULL
               AND (q.original_transaction_id = c.anchor OR q.history_anchor_transaction_id = c.anchor)
             ORDER BY q.updated_at DESC LIMIT 1),
            (SELECT q.app_user_id FROM jsonb_to_recordset($1::jsonb) AS v (original_transaction_id text, history_anchor text)
             JOIN purchases q ON (q.bundle_id, q.environment, q.original_transaction_id) = (u.bundle_id, u.environment, v.original_transaction_id)
             WHERE u.history_anchor IS NOT NULL AND v.history_anchor = u.history_anchor AND q.app_user_id IS NOT NULL
             ORDER BY q.updated_at DESC LIMIT 1))
        """

    /// The stored purchase's `appUserId` and the customer's history anchor (``inheritedAppUserId``), as `c`.
    static let storedCustomer = """
        LEFT JOIN LATERAL (
            SELECT s.app_user_id, COALESCE(u.history_anchor, s.history_anchor_transaction_id, u.original_transaction_id) AS anchor
            FROM (SELECT 1) AS one
            LEFT JOIN purchases s
              ON (s.bundle_id, s.environment, s.original_transaction_id) = (u.bundle_id, u.environment, u.original_transaction_id)
        ) AS c ON true
        """

    static let refreshPurchasesSQL: String = {
        let renewal = (signed: "renewal_signed_date_ms", fromNotification: "renewal_from_notification", columns: renewalDisagreementColumns)
        let status = (signed: "status_signed_date_ms", fromNotification: "status_from_notification", columns: ["status"])
        let renewalWins = wins(signed: renewal.signed, fromNotification: renewal.fromNotification, columns: renewal.columns)
        let statusWins = wins(signed: status.signed, fromNotification: status.fromNotification, columns: status.columns)
        let fromLatest = latestTransactionColumns.map {
            "\($0) = CASE WHEN EXCLUDED.latest_transaction_id IS NULL THEN p.\($0) ELSE EXCLUDED.\($0) END"
        }
        let fromRenewal = (renewalColumns + [renewal.signed, renewal.fromNotification]).map {
            "\($0) = CASE WHEN \(renewalWins) THEN EXCLUDED.\($0) ELSE p.\($0) END"
        }
        let fromStatus = ["status", status.signed, status.fromNotification].map {
            "\($0) = CASE WHEN \(statusWins) THEN EXCLUDED.\($0) ELSE p.\($0) END"
        }
        return """
            INSERT INTO purchases AS p (original_transaction_id, bundle_id, environment, latest_transaction_id, \(latestTransactionColumns.joined(separator: ", ")),
                \(renewalColumns.joined(separator: ", ")), renewal_signed_date_ms, renewal_from_notification, status, status_signed_date_ms,
                status_from_notification, last_signed_date_ms, last_notification_uuid, app_user_id)
            SELECT u.original_transaction_id, u.bundle_id, u.environment, l.transaction_id, \(latestTransactionColumns.map { "l.\($0)" }.joined(separator: ", ")),
                \(renewalColumns.map { "u.\($0)" }.joined(separator: ", ")), u.renewal_signed_date_ms, u.renewal_from_notification, u.status,
                u.status_signed_date_ms, u.status_from_notification, u.last_signed_date_ms, u.last_notification_uuid,
                \(inheritedAppUserId)
            FROM jsonb_to_recordset($1::jsonb) AS u (\(PurchaseUpdateColumns.definitions))
            LEFT JOIN LATERAL (
                SELECT transaction_id, \(latestTransactionColumns.joined(separator: ", "))
                FROM transactions
                WHERE bundle_id = u.bundle_id AND environment = u.environment AND original_transaction_id = u.original_transaction_id
                ORDER BY is_upgraded, purchase_date_ms DESC NULLS LAST, transaction_id DESC
                LIMIT 1
            ) AS l ON true
            \(storedCustomer)
            ORDER BY u.original_transaction_id
            ON CONFLICT (bundle_id, environment, original_transaction_id) DO UPDATE SET
                latest_transaction_id = COALESCE(EXCLUDED.latest_transaction_id, p.latest_transaction_id),
                \(fromLatest.joined(separator: ",\n    ")),
                \(fromRenewal.joined(separator: ",\n    ")),
                \(fromStatus.joined(separator: ",\n    ")),
                recheck_at_ms = GREATEST(p.recheck_at_ms,
                    \(recheck(signed: renewal.signed, fromNotification: renewal.fromNotification, columns: renewal.columns)),
                    \(recheck(signed: status.signed, fromNotification: status.fromNotification, columns: status.columns))),
                last_notification_uuid = CASE WHEN EXCLUDED.last_signed_date_ms >= COALESCE(p.last_signed_date_ms, -1)
                    THEN EXCLUDED.last_notification_uuid ELSE p.last_notification_uuid END,
                last_signed_date_ms = GREATEST(p.last_signed_date_ms, EXCLUDED.last_signed_date_ms),
                -- The ID an import gives (u's) replaces the stored one in this same row; without one,
                -- EXCLUDED holds the stored one (c), else the inherited one.
                app_user_id = COALESCE(EXCLUDED.app_user_id, p.app_user_id),
                updated_at = now()
            RETURNING \(purchaseColumns)
            """
    }()

    /// Recomputes purchases from their stored transactions (the latest one: not upgraded, newest
    /// purchaseDate) and moves their renewal, status and notification parts forward where the
    /// new data is not older than what is stored; returns the new states.
    func refreshPurchases(_ updates: [PurchaseUpdate], on transaction: DatabaseTransaction) async throws -> [String: PurchaseState] {
        var merged: [String: PurchaseUpdate] = [:]
        for update in updates {
            merged[update.originalTransactionId] = merged[update.originalTransactionId].map { $0.merged(with: update) } ?? update
        }
        guard !merged.isEmpty else { return [:] }
        var bindings = PostgresBindings()
        let target = try requiredTarget
        bindings.append(try Self.json(merged.keys.sorted().map { PurchaseUpdateColumns(merged[$0]!, of: target) }))
        let rows = try await transaction.query(
            PostgresQuery(unsafeSQL: Self.refreshPurchasesSQL, binds: bindings), preparedAs: RefreshPurchasesSQL.self, logger: logger)
        var result: [String: PurchaseState] = [:]
        for try await row in rows {
            let state = try purchaseState(row)
            result[state.originalTransactionId] = state
        }
        return result
    }
}

private enum RefreshPurchasesSQL: PreparedSQL {
    static var sql: String { PurchaseStore.refreshPurchasesSQL }
    /// The purchases' updates, as JSON.
    static let bindingTypes: [PostgresDataType] = [.text]
}

private enum PurchaseStatesSQL: PreparedSQL {
    static func query(originalTransactionIds: [String], bundleId: String, environment: AppStoreEnvironment) -> PostgresQuery {
        """
        SELECT p.* FROM unnest(\(originalTransactionIds)::text[]) AS key(original_transaction_id)
        CROSS JOIN LATERAL (
            SELECT \(unescaped: PurchaseStore.purchaseColumns) FROM purchases
            WHERE (bundle_id, environment, original_transaction_id) = (\(bundleId), \(environment), key.original_transaction_id)
            LIMIT 1
        ) p
        """
    }

    static let sql = query(originalTransactionIds: [], bundleId: "", environment: .production).sql
    static let bindingTypes: [PostgresDataType] = [.textArray, .text, .text]
}
