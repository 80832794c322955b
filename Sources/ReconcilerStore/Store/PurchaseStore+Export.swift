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
            let (bundleId, environment): (String, AppStoreEnvironment?) = (try columns["bundle_id"], try columns["environment"])
            let app = environment.map { AppTarget(bundleId: bundleId, environment: $0) }
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
}
