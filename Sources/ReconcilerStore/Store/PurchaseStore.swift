package import AppStoreServer
import Foundation
package import Logging
import PostgresNIO
package import ReconcilerDomain
package import ReconcilerShared

/// The SQL that writes verified App Store data and reads purchase state: `transactions`,
/// `purchases` and the change feed's rows are written here and nowhere else (`notifications` by
/// ``NotificationLog``, `history_revisions` by ``CustomerStore``). Every
/// method runs on a connection the caller holds inside a transaction, so notifications, their
/// transactions and the purchases they change commit together (or not at all).
///
/// Writes are set-based: a whole page travels as one JSON array and is written by one statement
/// per kind of row, because PostgreSQL round trips, not CPU, bound a replay's speed. Rows are
/// matched to columns by name (`jsonb_populate_recordset`), never by position, so a column added
/// or reordered cannot shift a value into the wrong place. Only parameterised SQL.
///
/// In a dry run the store works on the run's ``ShadowSchema``: the rows a page touches are
/// copied there first, and every statement then reads and writes the copies.
package struct PurchaseStore: Sendable {
    package let logger: Logger
    /// Set in a dry run: touched rows are copied into the shadow tables before they are used.
    package let shadow: ShadowSchema?
    /// The app and environment whose purchases this store writes and reads, with the app's rule
    /// for `entitled`; `nil` for a store that only reads across every app (export, the feed, the
    /// forwarding queue), which judges each app's rows by the rules it is given.
    package let scope: AppScope?
    /// The headers known to be stored (``Database/storeHeaders(of:)``): a statement that records
    /// signed values sends only the others (a 4.4 KB header, twice per batch, otherwise), and the
    /// hashes of these, which it checks are still stored (``JWSHeaders/missingSQL(parameter:)``).
    let storedHeaders: StoredHeaders?

    package init(logger: Logger, scope: AppScope? = nil) {
        self.init(logger: logger, shadow: nil, scope: scope)
    }

    package init(logger: Logger, shadow: ShadowSchema?, scope: AppScope?) {
        self.init(logger: logger, shadow: shadow, scope: scope, storedHeaders: nil)
    }

    private init(logger: Logger, shadow: ShadowSchema?, scope: AppScope?, storedHeaders: StoredHeaders?) {
        self.logger = logger
        self.shadow = shadow
        self.scope = scope
        self.storedHeaders = storedHeaders
    }

    /// The store of one app's purchases in a database, as the database's configuration says (a dry
    /// run's shadow, the headers already stored).
    package init(database: Database, scope: AppScope?) {
        self.init(logger: database.logger, shadow: database.shadow, scope: scope, storedHeaders: database.storedHeaders)
    }

    /// The app and environment of this store, when it has one.
    package var target: AppTarget? { scope?.target }

    /// The rule `entitled` is judged by: the app's (the default rule for a store across apps).
    var entitlement: EntitlementPolicy { scope?.entitlement ?? .init() }

    /// The app and environment a write or a read of one purchase is for.
    var requiredTarget: AppTarget {
        get throws {
            guard let target else {
                throw ReconcilerError(.missingApp, "a purchase was read or written without naming its app")
            }
            return target
        }
    }
    package var bundleId: String { get throws { try requiredTarget.bundleId } }
    package var environment: String { get throws { try requiredTarget.environment.rawValue } }

    /// The notifications this store's app records (`notifications`, and the forwarding queue rows
    /// written with them).
    package var notifications: NotificationLog { NotificationLog(logger: logger, target: target, storedHeaders: storedHeaders) }

    /// This app's customers and where their transaction history resumes.
    package var customers: CustomerStore {
        get throws { CustomerStore(logger: logger, shadow: shadow, target: try requiredTarget) }
    }

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

    /// A verified transaction to store.
    package struct TransactionWrite: Sendable {
        package var transaction: Verified<JWSTransactionDecodedPayload>
        /// Store it without its revocation: a REFUND_REVERSED notification's transaction.
        package var clearsRevocation: Bool
        /// It came inside a notification, not in a snapshot (Get Transaction History, Get All
        /// Subscription Statuses), which Apple signs when it is read: see ``snapshotMargin``.
        package var fromNotification: Bool
        /// The notification recorded in the same transaction whose `data.signedTransactionInfo` this
        /// is: the row names it instead of storing the signed value again.
        package var signedInNotification: String?

        package init(
            _ transaction: Verified<JWSTransactionDecodedPayload>, clearsRevocation: Bool = false, fromNotification: Bool = false,
            signedInNotification: String? = nil
        ) {
            self.transaction = transaction
            self.clearsRevocation = clearsRevocation
            self.fromNotification = fromNotification
            self.signedInNotification = signedInNotification
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
        package var environment: String
        package var renewalInfo: Verified<JWSRenewalInfoDecodedPayload>?
        package var notification: NotificationFacts?
        package var status: StatusFact?
        /// The renewal info came inside a notification, not from Get All Subscription Statuses.
        var renewalFromNotification: Bool

        package init(
            originalTransactionId: String, environment: String, renewalInfo: Verified<JWSRenewalInfoDecodedPayload>? = nil,
            notification: NotificationFacts? = nil, status: StatusFact? = nil
        ) {
            self.originalTransactionId = originalTransactionId
            self.environment = environment
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
            return result
        }
    }

    // MARK: Locks and the dry run's copies

    /// Serialises all writers of the same purchases until the transaction ends, and in a dry run
    /// copies the purchases (with their transactions), the notifications and the customers
    /// (revision and purchases) into the shadow tables. Keys are locked in one sorted order, once
    /// per transaction, so two transactions locking overlapping sets cannot deadlock. Concurrent
    /// copies of one notification need no lock: the second insert waits for the first and finds it.
    ///
    /// The locks come before the transaction's first write: PostgreSQL gives a transaction its id
    /// (`xid`) at its first write, and the change feed is read in `xid` order, so a writer that
    /// waited for a purchase must get a later `xid` than the one it waited for, or the feed would
    /// show that purchase's changes out of order. A lock taken after a write is refused.
    ///
    /// With `purchasesByNotification` (a page of notifications, UUID → their purchase), only the
    /// purchases of notifications not recorded yet are locked: a duplicate writes nothing, so a
    /// page that an earlier query already recorded (the sweep after the priority queries) waits
    /// for no one. A notification another transaction records meanwhile is a duplicate of it here.
    package func lock(
        purchases originalTransactionIds: some Collection<String>, notifications notificationUUIDs: [String] = [],
        purchasesByNotification: [String: String] = [:], anchors: [String] = [], on transaction: DatabaseTransaction
    ) async throws {
        let keys =
            Set(originalTransactionIds).sorted().map { LockKey(original_transaction_id: $0) }
            + purchasesByNotification.keys.sorted().map { LockKey(original_transaction_id: purchasesByNotification[$0]!, notification_uuid: $0) }
        if !keys.isEmpty {
            // Purchases of different apps may share an id: the lock is on the app's purchase.
            let app = "\(try bundleId) \(try environment) "
            // The page's recorded notifications are looked up by key, once: `OR NOT EXISTS (…)`
            // was planned as a hash of every stored UUID (a scan of `notifications` per page) for
            // as long as the table looked small enough, tens of thousands of rows.
            let query = LockPurchasesSQL.query(app: app, keys: try Self.json(keys), notificationUUIDs: purchasesByNotification.keys.sorted())
            let rows = try await transaction.query(query, preparedAs: LockPurchasesSQL.self, logger: logger)
            var wroteBefore = false
            for try await row in rows where try !row.decode((String, Bool).self).1 { wroteBefore = true }
            if wroteBefore {
                throw ReconcilerError(
                    .lockOrder, "purchases locked after the transaction wrote: the change feed would misorder their changes")
            }
        }
        if let shadow {
            try await shadow.copyOnFirstTouch(
                purchases: Array(Set(originalTransactionIds).union(purchasesByNotification.values)), notifications: notificationUUIDs,
                anchors: anchors, of: try requiredTarget, on: transaction, logger: logger)
        }
    }

    /// A purchase to lock, unless the notification it comes with is recorded already.
    private struct LockKey: Encodable {
        var original_transaction_id: String
        var notification_uuid: String? = nil
    }

    // MARK: Transactions

    /// One row of `transactions`; the keys are its column names, and the same list writes the
    /// upsert's columns, so a value cannot land in another column.
    struct TransactionColumns: Encodable {
        var transaction_id: String
        var original_transaction_id: String
        var environment: String
        var bundle_id: String
        var product_id: String?
        var product_type: String?
        var subscription_group_identifier: String?
        var web_order_line_item_id: String?
        var in_app_ownership_type: String?
        var transaction_reason: String?
        var purchase_date_ms: Int64?
        var original_purchase_date_ms: Int64?
        var expires_date_ms: Int64?
        var quantity: Int32?
        var is_upgraded: Bool
        var offer_type: Int32?
        var offer_identifier: String?
        var storefront: String?
        var currency: String?
        var price: Int64?
        var app_account_token: String?
        var revocation_date_ms: Int64?
        var revocation_reason: Int32?
        var revocation_type: String?
        var revocation_percentage: Int32?
        var app_transaction_id: String?
        var offer_period: String?
        var offer_discount_type: String?
        var storefront_id: String?
        var billing_plan_type: String?
        var previous_original_transaction_id: String?
        var advanced_commerce_info: RawJSON?
        var commitment_info: TransactionCommitmentInfo?
        var signed_date_ms: Int64
        var from_notification: Bool
        var payload_form: String
        var payload_sha256: String?
        /// The whole JWS, only when its parts would not rebuild it exactly.
        var signed_transaction_info: String?
        var signed_in_notification: String?
        var header_sha256: String?
        var payload: String?
        var signature: String?

        /// The header to store with the row, when it is stored in parts.
        var parts: JWSParts?

        private enum CodingKeys: String, CodingKey, CaseIterable {
            case transaction_id, original_transaction_id, environment, bundle_id, product_id, product_type, subscription_group_identifier,
                web_order_line_item_id, in_app_ownership_type, transaction_reason, purchase_date_ms, original_purchase_date_ms,
                expires_date_ms, quantity, is_upgraded, offer_type, offer_identifier, storefront, currency, price, app_account_token,
                revocation_date_ms, revocation_reason, revocation_type, revocation_percentage, app_transaction_id, offer_period,
                offer_discount_type, storefront_id, billing_plan_type, previous_original_transaction_id, advanced_commerce_info,
                commitment_info, signed_date_ms, from_notification, payload_form, payload_sha256, signed_transaction_info,
                signed_in_notification, header_sha256, payload, signature
        }

        init(_ write: TransactionWrite) {
            self.init(
                write.transaction.payload, signedValue: write.transaction.signedValue, clearsRevocation: write.clearsRevocation,
                fromNotification: write.fromNotification, signedInNotification: write.signedInNotification)
        }

        private init(
            _ decoded: JWSTransactionDecodedPayload, signedValue: String, clearsRevocation: Bool, fromNotification: Bool,
            signedInNotification: String?
        ) {
            var t = decoded
            if clearsRevocation {
                (t.revocationDate, t.revocationReason, t.revocationType, t.revocationPercentage) = (nil, nil, nil, nil)
            }
            transaction_id = t.transactionId ?? ""
            original_transaction_id = t.originalTransactionId ?? ""
            environment = t.environment?.rawValue ?? ""
            bundle_id = t.bundleId ?? ""
            product_id = t.productId
            product_type = t.type?.rawValue
            subscription_group_identifier = t.subscriptionGroupIdentifier
            web_order_line_item_id = t.webOrderLineItemId
            in_app_ownership_type = t.inAppOwnershipType?.rawValue
            transaction_reason = t.transactionReason?.rawValue
            purchase_date_ms = t.purchaseDate
            original_purchase_date_ms = t.originalPurchaseDate
            expires_date_ms = t.expiresDate
            quantity = t.quantity
            is_upgraded = t.isUpgraded ?? false
            offer_type = t.offerType?.rawValue
            offer_identifier = t.offerIdentifier
            storefront = t.storefront
            currency = t.currency
            price = t.price
            app_account_token = t.appAccountToken
            revocation_date_ms = t.revocationDate
            revocation_reason = t.revocationReason?.rawValue
            revocation_type = t.revocationType?.rawValue
            revocation_percentage = t.revocationPercentage
            app_transaction_id = t.appTransactionId
            offer_period = t.offerPeriod
            offer_discount_type = t.offerDiscountType?.rawValue
            storefront_id = t.storefrontId
            billing_plan_type = t.billingPlanType?.rawValue
            previous_original_transaction_id = t.previousOriginalTransactionId
            advanced_commerce_info = t.advancedCommerceInfo
            commitment_info = t.commitmentInfo
            signed_date_ms = t.signedDate ?? 0
            from_notification = fromNotification
            let stored = StoredTransactionPayload(signedValue, signedInNotification: signedInNotification)
            (payload_form, payload_sha256, signed_transaction_info, self.signed_in_notification) = (
                stored.payload_form, stored.payload_sha256, stored.signed_transaction_info, stored.signed_in_notification
            )
            (header_sha256, payload, signature, parts) = (stored.header_sha256, stored.payload, stored.signature, stored.parts)
        }

        /// The column names, in declaration order of the coding keys.
        static let names = CodingKeys.allCases.map(\.rawValue)
        /// The columns that are not what the transaction says: its key, its signing and how it is stored.
        static let notContent: Set<String> = [
            "transaction_id", "bundle_id", "environment", "signed_date_ms", "from_notification", "payload_form", "payload_sha256",
            "signed_transaction_info", "signed_in_notification", "header_sha256", "payload", "signature",
        ]
    }

    /// The columns of `transactions` that hold a signed value; the keys are their names.
    struct StoredTransactionPayload: Encodable {
        var payload_form: String
        /// SHA-256 of the JWS; not for one inside a notification, whose own hash covers it.
        var payload_sha256: String?
        /// The whole JWS, only when its parts would not rebuild it exactly.
        var signed_transaction_info: String?
        var signed_in_notification: String?
        var header_sha256: String?
        var payload: String?
        var signature: String?
        /// The header to store with the row, when it is stored in parts.
        var parts: JWSParts?

        private enum CodingKeys: String, CodingKey, CaseIterable {
            case payload_form, payload_sha256, signed_transaction_info, signed_in_notification, header_sha256, payload, signature
        }

        /// The value stored once: inside the notification it came in, else taken apart (the payload
        /// deflated), else whole.
        init(_ signedValue: String, signedInNotification: String?) {
            if let signedInNotification {
                (payload_form, signed_in_notification) = (PayloadForm.inNotification.rawValue, signedInNotification)
                return
            }
            payload_sha256 = Bytea.hex(JWSParts.sha256(signedValue))
            if let parts = JWSParts(exactly: signedValue), let payload = StoredPayloads(parts.payload) {
                payload_form = PayloadForm.parts.rawValue
                (header_sha256, self.payload, signature) = (Bytea.hex(parts.headerSHA256), Bytea.hex(payload.deflated), Bytea.hex(parts.signature))
                self.parts = parts
            } else {
                (payload_form, signed_transaction_info) = (PayloadForm.whole.rawValue, signedValue)
            }
        }

        static let names = CodingKeys.allCases.map(\.rawValue)
    }

    /// Whether two versions of a transaction, signed `a` and `b`, disagree on its revocation
    /// within ``snapshotMargin``, one from a notification and the other from a snapshot.
    private static func revocationConflict(_ a: String, _ b: String) -> String {
        """
        \(a).from_notification <> \(b).from_notification AND (\(a).revocation_date_ms IS NULL) <> (\(b).revocation_date_ms IS NULL)
        AND abs(\(a).signed_date_ms - \(b).signed_date_ms) <= \(snapshotMarginMilliseconds)
        """
    }

    /// Each transaction keeps its newest signed version, except that within ``snapshotMargin`` a
    /// notification's version wins over a snapshot's that disagrees with it on the revocation,
    /// whichever came first; such a purchase is read again once the margin has passed. A newer
    /// version that says the same as the stored one (all but its signedDate) is not written: the
    /// stored one, often kept inside its notification, stays, and nothing is written twice.
    static let upsertTransactionsSQL: String = {
        let columns = TransactionColumns.names.joined(separator: ", ")
        // What a version says: a newer version that says the same is not written (the stored one,
        // often inside its notification, stays).
        let content = TransactionColumns.names.filter { !TransactionColumns.notContent.contains($0) }
        let updates = TransactionColumns.names.filter { !["transaction_id", "bundle_id", "environment"].contains($0) }.map {
            "\($0) = EXCLUDED.\($0)"
        }.joined(separator: ", ")
        return """
            WITH headers AS (
                \(JWSHeaders.insertSQL(parameter: "$2"))
            ), missing_headers AS (
                \(JWSHeaders.missingSQL(parameter: "$2"))
            ), incoming AS (
                SELECT \(columns) FROM jsonb_populate_recordset(NULL::transactions, $1::jsonb)
            ), disagreements AS (
                SELECT i.bundle_id, i.environment, i.original_transaction_id,
                       max(CASE WHEN i.from_notification THEN i.signed_date_ms ELSE s.signed_date_ms END) AS notification_signed_ms
                FROM incoming i
                -- Each incoming version looks its stored one up by key: as a join, the incoming
                -- rows (estimated at 100) were hashed against a scan of the whole table. The
                -- purchase is named too (a transaction never changes purchase), so either index finds
                -- the row directly, whatever the table's statistics say; LIMIT keeps it a lookup.
                CROSS JOIN LATERAL (
                    SELECT * FROM transactions s
                    WHERE (s.bundle_id, s.environment, s.original_transaction_id, s.transaction_id)
                        = (i.bundle_id, i.environment, i.original_transaction_id, i.transaction_id)
                    LIMIT 1
                ) s
                WHERE \(revocationConflict("i", "s"))
                GROUP BY i.bundle_id, i.environment, i.original_transaction_id
            ), recheck AS (
                UPDATE purchases p
                SET recheck_at_ms = GREATEST(p.recheck_at_ms, d.notification_signed_ms + \(snapshotMarginMilliseconds) + 1)
                FROM disagreements d
                WHERE (p.bundle_id, p.environment, p.original_transaction_id) = (d.bundle_id, d.environment, d.original_transaction_id)
            ), upserted AS (
                INSERT INTO transactions AS stored (\(columns))
                SELECT \(columns) FROM incoming
                ON CONFLICT (bundle_id, environment, transaction_id) DO UPDATE SET \(updates), updated_at = now()
                WHERE CASE WHEN \(revocationConflict("stored", "EXCLUDED")) THEN EXCLUDED.from_notification
                           ELSE stored.signed_date_ms <= EXCLUDED.signed_date_ms END
                  AND (\(content.map { "stored.\($0)" }.joined(separator: ", ")))
                      IS DISTINCT FROM (\(content.map { "EXCLUDED.\($0)" }.joined(separator: ", ")))
            )
            SELECT sha256 FROM missing_headers
            """
    }()

    /// Stores transactions, each unless a version signed later is already stored. Several
    /// versions of one transaction in the batch: the newest signed one is kept.
    func upsertTransactions(_ transactions: [TransactionWrite], on transaction: DatabaseTransaction) async throws {
        var newest: [String: TransactionWrite] = [:]
        for write in transactions {
            let id = write.transaction.payload.transactionId ?? ""
            if let kept = newest[id], (kept.transaction.payload.signedDate ?? .min) > (write.transaction.payload.signedDate ?? .min) { continue }
            newest[id] = write
        }
        guard !newest.isEmpty else { return }
        let rows = newest.keys.sorted().map { TransactionColumns(newest[$0]!) }
        let wholeIds = rows.filter { $0.payload_form == PayloadForm.whole.rawValue }.map(\.transaction_id)
        if !wholeIds.isEmpty {
            logger.warning(
                "a signed transaction does not rebuild exactly from its parts: stored whole", metadata: ["transactionIds": "\(wholeIds)"])
        }
        var bindings = PostgresBindings()
        bindings.append(try Self.json(rows))
        let parts = rows.compactMap(\.parts)
        bindings.append(try Self.json(JWSHeaders.rows(for: parts, knowing: storedHeaders)))
        let result = try await transaction.query(
            PostgresQuery(unsafeSQL: Self.upsertTransactionsSQL, binds: bindings), preparedAs: UpsertTransactionsSQL.self, logger: logger)
        var missing: [String] = []
        for try await hash in result.decode(String.self) { missing.append(hash) }
        try await JWSHeaders(logger: logger).restore(missing, of: parts, stored: storedHeaders, on: transaction)
    }

    // MARK: Purchases

    static let purchaseColumns = """
        original_transaction_id, latest_transaction_id, product_id, environment, purchase_date_ms, expires_date_ms,
        revocation_date_ms, auto_renew_status, last_signed_date_ms, app_account_token, status, product_type,
        grace_period_expires_date_ms, is_in_billing_retry_period, bundle_id, app_transaction_id, revocation_type, revocation_percentage,
        offer_type, offer_identifier
        """

    /// A purchase as `export` shows it, from a row that selects ``purchaseColumns``, `entitled` as of
    /// `now` (UNIX ms) by `policy` (this store's app's when `nil`).
    func purchaseState(
        _ row: PostgresRow, now: Timestamp = .now, policy: EntitlementPolicy? = nil
    ) throws -> PurchaseState {
        let columns = NamedColumns(row)
        let (productId, environment): (String?, String?) = (try columns["product_id"], try columns["environment"])
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
            offerType: try columns["offer_type"], offerIdentifier: try columns["offer_identifier"])
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
            status_from_notification boolean
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
                status_from_notification, last_signed_date_ms, last_notification_uuid)
            SELECT u.original_transaction_id, u.bundle_id, u.environment, l.transaction_id, \(latestTransactionColumns.map { "l.\($0)" }.joined(separator: ", ")),
                \(renewalColumns.map { "u.\($0)" }.joined(separator: ", ")), u.renewal_signed_date_ms, u.renewal_from_notification, u.status,
                u.status_signed_date_ms, u.status_from_notification, u.last_signed_date_ms, u.last_notification_uuid
            FROM jsonb_to_recordset($1::jsonb) AS u (\(PurchaseUpdateColumns.definitions))
            LEFT JOIN LATERAL (
                SELECT transaction_id, \(latestTransactionColumns.joined(separator: ", "))
                FROM transactions
                WHERE bundle_id = u.bundle_id AND environment = u.environment AND original_transaction_id = u.original_transaction_id
                ORDER BY is_upgraded, purchase_date_ms DESC NULLS LAST, transaction_id DESC
                LIMIT 1
            ) AS l ON true
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

    /// What made a change, for the change feed.
    package enum ChangeSource: String, Sendable, Codable {
        /// The live webhook.
        case webhook
        /// A notification a run replayed from Get Notification History.
        case history
        /// Get Transaction History (phase 2).
        case transactionHistory = "transaction_history"
        /// Get All Subscription Statuses.
        case statusRefresh = "status_refresh"
    }

    /// Where a write comes from: its source, its run, and per purchase (by originalTransactionId)
    /// the notification behind it.
    package struct ChangeOrigin: Sendable {
        package var source: ChangeSource
        package var runId: Int64?
        package var notifications: [String: Cause] = [:]

        package init(source: ChangeSource, runId: Int64? = nil, notifications: [String: Cause] = [:]) {
            self.source = source
            self.runId = runId
            self.notifications = notifications
        }

        /// The notification that caused a purchase's change: its feed row names it and carries its
        /// type and subtype, so a consumer can react to the event (a refund, a renewal).
        package struct Cause: Sendable, Hashable {
            package var notificationUUID: String
            package var notificationType: String
            package var subtype: String?

            package init(notificationUUID: String, notificationType: String, subtype: String?) {
                self.notificationUUID = notificationUUID
                self.notificationType = notificationType
                self.subtype = subtype
            }
        }
    }

    /// Writes verified signed data (the caller holds the purchases' locks) and returns each
    /// purchase's state before and after. The one write path for live notifications, replays and
    /// gap fill; it takes only ``Verified`` values, which only the verifier makes. Every purchase
    /// that changed (``PurchaseChange/changesPurchase``: `entitled` and `lastSignedDate` aside) gets
    /// a row in the change feed in this same transaction, and listeners are told when it commits.
    /// `events`, given the changes, names the notifications that get feed rows of their own
    /// (``NotificationFeedRow``), written after the purchases' rows by the same statement.
    package func write(
        transactions: [TransactionWrite], updates: [PurchaseUpdate], before: [String: PurchaseState], origin: ChangeOrigin,
        events: ([String: PurchaseChange]) -> [NotificationFeedRow] = { _ in [] }, on transaction: DatabaseTransaction
    ) async throws -> [String: PurchaseChange] {
        try await upsertTransactions(transactions, on: transaction)
        let after = try await refreshPurchases(updates, on: transaction)
        let changes = after.mapValues { PurchaseChange(before: before[$0.originalTransactionId], after: $0) }
        try await recordInFeed(changes.values.filter(\.changesPurchase), events: events(changes), origin: origin, on: transaction)
        return changes
    }

    /// A notification recorded for the first time that gets a feed row of its own (kind
    /// `notification`): it changed no purchase, or Apple set a deadline for it.
    package struct NotificationFeedRow: Sendable {
        package var notificationUUID: String
        package var notificationType: String
        package var subtype: String?
        package var originalTransactionId: String?
        package var transactionId: String?
        package var appAccountToken: String?
        package var signedDate: Int64
        package var respondBy: Timestamp?

        package init(
            notificationUUID: String, notificationType: String, subtype: String?, originalTransactionId: String?, transactionId: String?,
            appAccountToken: String?, signedDate: Int64, respondBy: Timestamp?
        ) {
            self.notificationUUID = notificationUUID
            self.notificationType = notificationType
            self.subtype = subtype
            self.originalTransactionId = originalTransactionId
            self.transactionId = transactionId
            self.appAccountToken = appAccountToken
            self.signedDate = signedDate
            self.respondBy = respondBy
        }
    }

    /// The channel listeners of the change feed wait on.
    package static let changeChannel = "reconciler_changes"

    /// One row of `purchase_changes`: a purchase's change (`before_state`, `after_state`) or a
    /// notification's event (its type, subtype and deadline); the keys are the columns.
    private struct FeedRow: Encodable {
        var original_transaction_id: String?
        var bundle_id: String
        var environment: String
        var app_account_token: String?
        var source: String
        var notification_uuid: String?
        var run_id: Int64?
        var kind: String
        var before_state: PurchaseState?
        var after_state: PurchaseState?
        var notification_type: String?
        var subtype: String?
        var transaction_id: String?
        var signed_date_ms: Int64?
        var respond_by_ms: Int64?
    }

    /// Writes the purchases' changes (by originalTransactionId), then the notifications' events in
    /// the order given, in one statement of the caller's transaction (after the purchases' locks, as
    /// every write); listeners are told when it commits (a dry run's changes are its own).
    private func recordInFeed(
        _ changes: [PurchaseChange], events: [NotificationFeedRow], origin: ChangeOrigin, on transaction: DatabaseTransaction
    ) async throws {
        guard !changes.isEmpty || !events.isEmpty else { return }
        let target = try requiredTarget
        let changeRows = changes.sorted { $0.after.originalTransactionId < $1.after.originalTransactionId }.map {
            let cause = origin.notifications[$0.after.originalTransactionId]
            return FeedRow(
                original_transaction_id: $0.after.originalTransactionId, bundle_id: target.bundleId, environment: target.environment.rawValue,
                app_account_token: $0.after.appAccountToken ?? $0.before?.appAccountToken, source: origin.source.rawValue,
                notification_uuid: cause?.notificationUUID, run_id: origin.runId, kind: FeedKind.purchase.rawValue, before_state: $0.before,
                after_state: $0.after, notification_type: cause?.notificationType, subtype: cause?.subtype)
        }
        let eventRows = events.map {
            FeedRow(
                original_transaction_id: $0.originalTransactionId, bundle_id: target.bundleId, environment: target.environment.rawValue,
                app_account_token: $0.appAccountToken, source: origin.source.rawValue, notification_uuid: $0.notificationUUID,
                run_id: origin.runId, kind: FeedKind.notification.rawValue, notification_type: $0.notificationType, subtype: $0.subtype,
                transaction_id: $0.transactionId, signed_date_ms: $0.signedDate, respond_by_ms: $0.respondBy?.millisecondsSince1970)
        }
        _ = try await transaction.query(
            RecordInFeedSQL.query(rows: try Self.json(changeRows + eventRows), notify: shadow == nil), preparedAs: RecordInFeedSQL.self,
            logger: logger)
    }

    // MARK: Reading

    /// Every purchase of some apps and environments (`apps`; `nil`: every one the database
    /// holds), ordered by originalTransactionId (then app and environment), optionally of one
    /// environment or one app user (`appAccountToken`), with `entitled` as of `now` (UNIX ms) by
    /// each app and environment's own entitlement choices (`entitlements`; else this store's).
    ///
    /// ```swift
    /// try await store.exportPurchases(apps: [one, two], entitlements: [one: .init(sandboxEntitles: false)], in: database) { print(try $0.jsonLine()) }
    /// ```
    package func exportPurchases(
        apps: [AppTarget]?, environment: String? = nil, appAccountToken: String? = nil,
        entitlements: [AppTarget: EntitlementPolicy] = [:], otherApps: EntitlementPolicy? = nil, at now: Timestamp = .now,
        in database: Database, _ body: (PurchaseState) throws -> Void
    ) async throws {
        let scope = try Self.scope(apps)
        // Streamed outside a transaction: a whole export is one statement, read as it comes.
        let rows = try await database.client.query(
            """
            SELECT \(unescaped: Self.purchaseColumns) FROM purchases p
            WHERE (\(scope)::jsonb IS NULL OR EXISTS (
                    SELECT 1 FROM jsonb_to_recordset(\(scope)::jsonb) AS s (bundle_id text, environment text)
                    WHERE s.bundle_id = p.bundle_id AND s.environment = p.environment))
              AND (\(environment)::text IS NULL OR environment = \(environment))
              AND (\(appAccountToken)::text IS NULL OR app_account_token = \(appAccountToken))
            ORDER BY original_transaction_id, bundle_id, environment
            """, logger: logger)
        // By bundle id and environment, whatever Apple ID the keys carry.
        let policies = Dictionary(
            entitlements.map { (AppTarget(bundleId: $0.key.bundleId, environment: $0.key.environment), $0.value) }, uniquingKeysWith: { $1 })
        for try await row in rows {
            let columns = NamedColumns(row)
            let (bundleId, environment): (String, String?) = (try columns["bundle_id"], try columns["environment"])
            let app = environment.map { AppTarget(bundleId: bundleId, environment: AppStoreEnvironment(rawValue: $0)) }
            try body(try purchaseState(row, now: now, policy: app.flatMap { policies[$0] } ?? otherApps ?? entitlement))
        }
    }

    /// Some apps and environments as one bind parameter, a JSON array of `{bundle_id, environment}`
    /// read with `jsonb_to_recordset`; `nil` (SQL NULL) for every app and environment.
    package static func scope(_ apps: [AppTarget]?) throws -> String? {
        struct Row: Encodable {
            var bundle_id: String
            var environment: String
        }
        return try apps.map { apps in try json(apps.map { Row(bundle_id: $0.bundleId, environment: $0.environment.rawValue) }) }
    }

    /// A JSON array of rows, bound as one parameter (``RowJSON``).
    package static func json(_ rows: some Encodable) throws -> String {
        try RowJSON.encode(rows)
    }
}

extension ReconcilerError {
    /// Reads a state the reconciler itself stored in `column`; a value it does not know throws
    /// ``Code/unknownStoredValue`` instead of falling back to a guess (the value is in
    /// ``debugDescription`` only: a column of the reconciler's own states, but still stored data).
    static func stored<State: RawRepresentable>(_ raw: String, in column: String, as state: State.Type = State.self) throws -> State
    where State.RawValue == String {
        guard let value = State(rawValue: raw) else {
            throw ReconcilerError(
                .unknownStoredValue, "\(column) holds a value this version does not know (written by a newer version, or by hand)",
                details: "\"\(raw)\"")
        }
        return value
    }
}

/// The live path's statements, prepared (``PreparedSQL``).
private enum UpsertTransactionsSQL: PreparedSQL {
    static var sql: String { PurchaseStore.upsertTransactionsSQL }
    /// The transactions' rows and their headers' rows, as JSON.
    static let bindingTypes: [PostgresDataType] = [.text, .text]
}

private enum RefreshPurchasesSQL: PreparedSQL {
    static var sql: String { PurchaseStore.refreshPurchasesSQL }
    /// The purchases' updates, as JSON.
    static let bindingTypes: [PostgresDataType] = [.text]
}

private enum LockPurchasesSQL: PreparedSQL {
    static func query(app: String, keys: String, notificationUUIDs: [String]) -> PostgresQuery {
        """
        SELECT pg_advisory_xact_lock(727002, k)::text, pg_current_xact_id_if_assigned() IS NULL
        FROM (
            SELECT DISTINCT hashtext(\(app) || key.original_transaction_id) AS k
            FROM jsonb_to_recordset(\(keys)::jsonb) AS key (original_transaction_id text, notification_uuid text)
            WHERE key.notification_uuid IS NULL
               OR NOT key.notification_uuid = ANY(ARRAY(
                   SELECT n.notification_uuid FROM notifications n
                   WHERE n.notification_uuid = ANY(\(notificationUUIDs)::text[])))
            ORDER BY 1
        ) AS sorted_keys
        """
    }

    static let sql = query(app: "", keys: "", notificationUUIDs: []).sql
    /// The app's prefix of a lock key, the keys as JSON, the page's notification UUIDs.
    static let bindingTypes: [PostgresDataType] = [.text, .text, .textArray]
}

private enum PurchaseStatesSQL: PreparedSQL {
    static func query(originalTransactionIds: [String], bundleId: String, environment: String) -> PostgresQuery {
        """
        SELECT p.* FROM unnest(\(originalTransactionIds)::text[]) AS key(original_transaction_id)
        CROSS JOIN LATERAL (
            SELECT \(unescaped: PurchaseStore.purchaseColumns) FROM purchases
            WHERE (bundle_id, environment, original_transaction_id) = (\(bundleId), \(environment), key.original_transaction_id)
            LIMIT 1
        ) p
        """
    }

    static let sql = query(originalTransactionIds: [], bundleId: "", environment: "").sql
    static let bindingTypes: [PostgresDataType] = [.textArray, .text, .text]
}

/// The change feed's rows, purchases' changes and notifications' events (``PurchaseStore``'s `recordInFeed`).
private enum RecordInFeedSQL: PreparedSQL {
    static func query(rows: String, notify: Bool) -> PostgresQuery {
        """
        WITH recorded AS (
            INSERT INTO purchase_changes (original_transaction_id, bundle_id, environment, app_account_token, source, notification_uuid, run_id,
                kind, before_state, after_state, notification_type, subtype, transaction_id, signed_date_ms, respond_by_ms)
            SELECT original_transaction_id, bundle_id, environment, app_account_token, source, notification_uuid, run_id, kind,
                before_state, after_state, notification_type, subtype, transaction_id, signed_date_ms, respond_by_ms
            FROM jsonb_populate_recordset(NULL::purchase_changes, \(rows)::jsonb)
        )
        SELECT pg_notify(\(PurchaseStore.changeChannel), '') WHERE \(notify)
        """
    }

    static let sql = query(rows: "", notify: false).sql
    /// The rows as JSON, the channel, whether to notify (not in a dry run: its changes are its own).
    static let bindingTypes: [PostgresDataType] = [.text, .text, .bool]
}
