import PostgresNIO

/// What `reconciler set-app-account-token` checks in the store before it asks Apple.
extension PurchaseStore {
    /// Whether a stored transaction of this app and environment was shared through Family Sharing
    /// (`inAppOwnershipType` `FAMILY_SHARED`); `nil` when no transaction with this ID is stored.
    package func isFamilyShared(transactionId: String, on transaction: DatabaseTransaction) async throws -> Bool? {
        let (bundleId, environment) = (try bundleId, try environment)
        let rows = try await transaction.query(
            """
            SELECT in_app_ownership_type FROM transactions
            WHERE bundle_id = \(bundleId) AND environment = \(environment) AND transaction_id = \(transactionId)
            """, logger: logger)
        for try await ownership in rows.decode(String?.self) { return ownership == "FAMILY_SHARED" }
        return nil
    }
}
