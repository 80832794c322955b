package import AppStoreServer
import Foundation
package import Logging
import PostgresNIO
package import ReconcilerDomain
package import ReconcilerShared

/// Storing verified transactions (`transactions`), the first step of every write.
extension PurchaseStore {
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

    /// One row of `transactions`; the keys are its column names, and the same list writes the
    /// upsert's columns, so a value cannot land in another column. What the transaction says is
    /// ``TransactionContent``; how its signed value is kept is the ``StoredTransactionPayload`` every writer of
    /// a signed transaction stores (the upsert here, and re-storing legacy rows).
    struct TransactionColumns: Encodable {
        var content: TransactionContent
        var stored: StoredTransactionPayload

        init(_ write: TransactionWrite) {
            content = TransactionContent(
                write.transaction.payload, clearsRevocation: write.clearsRevocation, fromNotification: write.fromNotification)
            stored = StoredTransactionPayload(write.transaction.signedValue, signedInNotification: write.signedInNotification)
        }

        /// One JSON object with both parts' columns.
        func encode(to encoder: any Encoder) throws {
            try content.encode(to: encoder)
            try stored.encode(to: encoder)
        }

        /// The column names: the content's, then the stored value's.
        static let names = TransactionContent.names + StoredTransactionPayload.names
        /// The columns that are not what the transaction says: its key, its signing and how it is stored.
        static let notContent = Set(["transaction_id", "bundle_id", "environment", "signed_date_ms", "from_notification"])
            .union(StoredTransactionPayload.names)
    }

    /// The columns of `transactions` that say what the transaction is.
    struct TransactionContent: Encodable {
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

        private enum CodingKeys: String, CodingKey, CaseIterable {
            case transaction_id, original_transaction_id, environment, bundle_id, product_id, product_type, subscription_group_identifier,
                web_order_line_item_id, in_app_ownership_type, transaction_reason, purchase_date_ms, original_purchase_date_ms,
                expires_date_ms, quantity, is_upgraded, offer_type, offer_identifier, storefront, currency, price, app_account_token,
                revocation_date_ms, revocation_reason, revocation_type, revocation_percentage, app_transaction_id, offer_period,
                offer_discount_type, storefront_id, billing_plan_type, previous_original_transaction_id, advanced_commerce_info,
                commitment_info, signed_date_ms, from_notification
        }

        init(_ decoded: JWSTransactionDecodedPayload, clearsRevocation: Bool, fromNotification: Bool) {
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
        }

        /// The column names, in declaration order of the coding keys.
        static let names = CodingKeys.allCases.map(\.rawValue)
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
        let wholeIds = rows.filter { $0.stored.payload_form == PayloadForm.whole.rawValue }.map(\.content.transaction_id)
        if !wholeIds.isEmpty {
            logger.warning(
                "a signed transaction does not rebuild exactly from its parts: stored whole", metadata: ["transactionIds": "\(wholeIds)"])
        }
        var bindings = PostgresBindings()
        bindings.append(try Self.json(rows))
        let parts = rows.compactMap(\.stored.parts)
        bindings.append(try Self.json(JWSHeaders.rows(for: parts, knowing: storedHeaders)))
        let result = try await transaction.query(
            PostgresQuery(unsafeSQL: Self.upsertTransactionsSQL, binds: bindings), preparedAs: UpsertTransactionsSQL.self, logger: logger)
        var missing: [String] = []
        for try await hash in result.decode(String.self) { missing.append(hash) }
        try await JWSHeaders(logger: logger).restore(missing, of: parts, stored: storedHeaders, on: transaction)
    }
}

private enum UpsertTransactionsSQL: PreparedSQL {
    static var sql: String { PurchaseStore.upsertTransactionsSQL }
    /// The transactions' rows and their headers' rows, as JSON.
    static let bindingTypes: [PostgresDataType] = [.text, .text]
}
