package import AppStoreServer
import Foundation
package import Logging
import PostgresNIO
package import ReconcilerDomain
package import ReconcilerShared

/// Reading purchases across apps: `reconciler export`.
extension PurchaseStore {
    /// Every purchase of some apps and environments (`apps`; `nil`: every one the database
    /// holds), ordered by originalTransactionId (then app and environment), optionally of one
    /// environment or one app user (`appAccountToken`, or the app's own `appUserId`), with `entitled` as of `now` (UNIX ms) by
    /// each app and environment's own entitlement choices (`entitlements`; else this store's).
    ///
    /// ```swift
    /// try await store.exportPurchases(apps: [one, two], entitlements: [one: .init(sandboxEntitles: false)], in: database) { print(try $0.jsonLine()) }
    /// ```
    package func exportPurchases(
        apps: [AppTarget]?, environment: AppStoreEnvironment? = nil, appAccountToken: String? = nil, appUserId: String? = nil,
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
              AND (\(appUserId)::text IS NULL OR app_user_id = \(appUserId))
            ORDER BY original_transaction_id, bundle_id, environment
            """, logger: logger)
        // By bundle id and environment, whatever Apple ID the keys carry.
        let policies = Dictionary(
            entitlements.map { (AppTarget(bundleId: $0.key.bundleId, environment: $0.key.environment), $0.value) }, uniquingKeysWith: { $1 })
        for try await row in rows {
            let columns = NamedColumns(row)
            let (bundleId, environment): (String, AppStoreEnvironment?) = (try columns["bundle_id"], try columns["environment"])
            let app = environment.map { AppTarget(bundleId: bundleId, environment: $0) }
            try body(try purchaseState(row, now: now, policy: app.flatMap { policies[$0] } ?? otherApps ?? entitlement))
        }
    }

    /// The keys of `export --transactions`, in their order.
    package static let transactionExportKeys = [
        "transactionId", "originalTransactionId", "productId", "type", "purchaseDate", "expiresDate", "revocationDate", "price", "currency",
        "storefront", "offerType", "offerIdentifier", "revocationType", "revocationPercentage", "billingPlanType", "billingPeriodNumber",
        "commitmentExpiresDate", "commitmentPrice", "totalBillingPeriods", "bundleId", "environment", "appUserId", "updatedAt",
    ]

    /// Every stored transaction (its newest signed state) of some apps and environments (`apps`;
    /// `nil`: every one), optionally of one environment, written at or after `changedSince`
    /// (`updatedAt`: when the reconciler last wrote the row), ordered by `updatedAt` then
    /// transaction: one ``ExportRow`` each with ``transactionExportKeys``. `price` and `currency`
    /// are as Apple signed them (milliunits). `appUserId` is the purchase's (``PurchaseState/appUserId``);
    /// with `appUserId`, only that user's transactions.
    package func exportTransactions(
        apps: [AppTarget]?, environment: AppStoreEnvironment? = nil, changedSince: Timestamp? = nil, appUserId: String? = nil, in database: Database,
        _ body: (ExportRow) throws -> Void
    ) async throws {
        let scope = try Self.scope(apps)
        let since = changedSince?.millisecondsSince1970
        let rows = try await database.client.query(
            """
            SELECT t.transaction_id, t.original_transaction_id, t.product_id, t.product_type, t.purchase_date_ms, t.expires_date_ms,
                t.revocation_date_ms, t.price, t.currency, t.storefront, t.offer_type, t.offer_identifier, t.revocation_type,
                t.revocation_percentage, t.billing_plan_type, (t.commitment_info ->> 'billingPeriodNumber')::bigint AS billing_period_number,
                (t.commitment_info ->> 'commitmentExpiresDate')::bigint AS commitment_expires_date,
                (t.commitment_info ->> 'commitmentPrice')::bigint AS commitment_price,
                (t.commitment_info ->> 'totalBillingPeriods')::bigint AS total_billing_periods, t.bundle_id, t.environment,
                (extract(epoch FROM t.updated_at) * 1000)::bigint AS updated_at_ms, p.app_user_id
            FROM transactions t
            LEFT JOIN purchases p
              ON (p.bundle_id, p.environment, p.original_transaction_id) = (t.bundle_id, t.environment, t.original_transaction_id)
            WHERE (\(scope)::jsonb IS NULL OR EXISTS (
                    SELECT 1 FROM jsonb_to_recordset(\(scope)::jsonb) AS s (bundle_id text, environment text)
                    WHERE s.bundle_id = t.bundle_id AND s.environment = t.environment))
              AND (\(environment)::text IS NULL OR t.environment = \(environment))
              AND (\(since)::bigint IS NULL OR t.updated_at >= to_timestamp(\(since)::bigint / 1000.0))
              AND (\(appUserId)::text IS NULL OR p.app_user_id = \(appUserId))
            ORDER BY t.updated_at, t.bundle_id, t.environment, t.transaction_id
            """, logger: logger)
        for try await row in rows {
            let columns = NamedColumns(row)
            let offerType: Int32? = try columns["offer_type"]
            let revocationPercentage: Int32? = try columns["revocation_percentage"]
            let values: [ExportRow.Value] = [
                .init(try columns["transaction_id"] as String?), .init(try columns["original_transaction_id"] as String?),
                .init(try columns["product_id"] as String?), .init(try columns["product_type"] as String?),
                .init(try columns["purchase_date_ms"] as Int64?), .init(try columns["expires_date_ms"] as Int64?),
                .init(try columns["revocation_date_ms"] as Int64?), .init(try columns["price"] as Int64?), .init(try columns["currency"] as String?),
                .init(try columns["storefront"] as String?), .init(offerType), .init(try columns["offer_identifier"] as String?),
                .init(try columns["revocation_type"] as String?), .init(revocationPercentage), .init(try columns["billing_plan_type"] as String?),
                .init(try columns["billing_period_number"] as Int64?), .init(try columns["commitment_expires_date"] as Int64?),
                .init(try columns["commitment_price"] as Int64?), .init(try columns["total_billing_periods"] as Int64?),
                .init(try columns["bundle_id"] as String?), .init(try columns["environment"] as String?),
                .init(try columns["app_user_id"] as String?),
                .init(try columns["updated_at_ms"] as Int64?),
            ]
            try body(ExportRow(Array(zip(Self.transactionExportKeys, values)).map { (key: $0.0, value: $0.1) }))
        }
    }

    /// What pruning removed of the feed `export --history` reads: every row up to this change ID
    /// (0: none), so a purchase's history starts at its first row kept.
    package func prunedThroughChangeId(in database: Database) async throws -> Int64 {
        let rows = try await database.client.query("SELECT change_id FROM purchase_changes_pruned", logger: logger)
        for try await id in rows.decode(Int64.self) { return id }
        return 0
    }

    /// Every state of each purchase the feed keeps (its rows of kind `purchase`), of some apps and
    /// environments (`apps`; `nil`: every one): `validFrom` is the time its feed row was written,
    /// `validTo` the next row's (null for the current state), so a purchase's states tile its
    /// life from its first kept row; then `changeId`, `source` and the state's fields (sorted), as
    /// the purchase view prints them. By purchase, then in commit order. With `appUserId`, only
    /// the purchases that carry it now (as the purchase view selects them), each with every state
    /// kept, those from before the ID was given included.
    package func exportHistory(
        apps: [AppTarget]?, environment: AppStoreEnvironment? = nil, appUserId: String? = nil, in database: Database,
        _ body: (ExportRow) throws -> Void
    )
        async throws
    {
        let scope = try Self.scope(apps)
        let rows = try await database.client.query(
            """
            SELECT c.bundle_id, c.environment, c.original_transaction_id, c.change_id, c.source, c.after_state::text AS state,
                (extract(epoch FROM c.changed_at) * 1000)::bigint AS valid_from,
                (extract(epoch FROM lead(c.changed_at) OVER purchase) * 1000)::bigint AS valid_to
            FROM purchase_changes c
            WHERE c.kind = 'purchase'
              AND (\(scope)::jsonb IS NULL OR EXISTS (
                    SELECT 1 FROM jsonb_to_recordset(\(scope)::jsonb) AS s (bundle_id text, environment text)
                    WHERE s.bundle_id = c.bundle_id AND s.environment = c.environment))
              AND (\(environment)::text IS NULL OR c.environment = \(environment))
              AND (\(appUserId)::text IS NULL OR (c.bundle_id, c.environment, c.original_transaction_id) IN (
                    SELECT p.bundle_id, p.environment, p.original_transaction_id FROM purchases p WHERE p.app_user_id = \(appUserId)))
            WINDOW purchase AS (PARTITION BY c.bundle_id, c.environment, c.original_transaction_id ORDER BY c.xid, c.change_id)
            ORDER BY c.bundle_id, c.environment, c.original_transaction_id, c.xid, c.change_id
            """, logger: logger)
        for try await row in rows {
            let columns = NamedColumns(row)
            let state = try ExportRow(sortedJSONObject: try columns["state"] as String)
            let head: [(key: String, value: ExportRow.Value)] = [
                ("bundleId", .init(try columns["bundle_id"] as String?)), ("environment", .init(try columns["environment"] as String?)),
                ("originalTransactionId", .init(try columns["original_transaction_id"] as String?)),
                ("validFrom", .init(try columns["valid_from"] as Int64?)), ("validTo", .init(try columns["valid_to"] as Int64?)),
                ("changeId", .init(try columns["change_id"] as Int64?)), ("source", .init(try columns["source"] as String?)),
            ]
            let named = Set(head.map(\.key))
            try body(ExportRow(head + state.fields.filter { !named.contains($0.key) }))
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
}
