import AppStoreServer
import Foundation
import PostgresNIO
package import ReconcilerDomain
package import ReconcilerShared

/// Feed rows of source `time`: a purchase's `entitled` flipped because a moment passed (its
/// `expiresDate`, its `gracePeriodExpiresDate`, the end of a non-renewing term), with no
/// notification from Apple. The end of billing retry has no signed date: only Apple's
/// notification tells it.
///
/// Under the app's rule `entitled` only ever goes from `true` to `false` as time passes, so each
/// version of a purchase has at most one such moment: the later of its expiry and grace period end
/// (auto-renewable, and non-renewing without a configured term), or its purchase date plus the
/// term. A renewal moves it; a revocation removes it. The moment is recorded in
/// `entitlement_instants` (the unique key (purchase, moment)) with its feed row, so serve's leader
/// and every run may look, and only one writes it.
///
/// ```swift
/// let (changes, _) = try await store.recordTimeFlips(since: now - .seconds(86_400), until: now, on: transaction)
/// ```
extension PurchaseStore {
    /// Writes a `time` row for each purchase of this store's app whose moment of losing entitlement
    /// came after `since` and by `until` (the caller's clock) and has none yet, at most `limit` of
    /// them; returns the rows' changes, and how many moments were due (call again while
    /// that is `limit`: a moment that flipped nothing is claimed too, with no row).
    ///
    /// One short transaction: the due purchases are read, locked in one sorted set, read again
    /// (a renewal committed meanwhile moved their moment), and each moment is claimed by its
    /// unique key before its row is written.
    package func recordTimeFlips(
        since: Timestamp, until: Timestamp, limit: Int = 500, on transaction: DatabaseTransaction
    ) async throws -> (changes: [PurchaseChange], due: Int) {
        let due = try await dueFlips(since: since, until: until, limit: limit, only: nil, on: transaction)
        guard !due.isEmpty else { return ([], 0) }
        try await lock(purchases: due.map(\.originalTransactionId), on: transaction)
        let current = try await dueFlips(since: since, until: until, limit: limit, only: due.map(\.originalTransactionId), on: transaction)
        guard !current.isEmpty else { return ([], due.count) }
        let claimed = try await claim(current, on: transaction)
        let changes = current.filter { claimed.contains($0.key) }.compactMap(\.change)
        // Named by no run, whoever writes it: time changed the purchase, not a run's recovery, so a
        // run's rows (`changes --run-id`) stay what it recovered; a run counts its time rows apart.
        try await recordInFeed(changes, events: [], origin: ChangeOrigin(source: .time), on: transaction)
        return (changes, due.count)
    }

    /// Forgets the moments recorded more than `age` ago (by the database's clock), of every app:
    /// a writer looks at a moment only for its lookback after it passed, so one recorded longer ago
    /// than that is never due again, and the table stays as small as a day or two of endings.
    package func forgetRecordedMoments(olderThan age: Duration, on transaction: DatabaseTransaction) async throws {
        try await transaction.query(
            "DELETE FROM entitlement_instants WHERE recorded_at < now() - \(age.milliseconds) * interval '1 millisecond'", logger: logger)
    }

    /// A purchase whose moment fell due, and its state just before and at that moment.
    private struct DueFlip {
        var originalTransactionId: String
        var instant: Int64
        /// `nil` when `entitled` did not flip at the moment (it was not entitled before it): the
        /// moment is still claimed, so it is not looked at again.
        var change: PurchaseChange?

        var key: String { "\(originalTransactionId) \(instant)" }
    }

    /// The purchases whose moment is in (`since`, `until`] with no recorded moment, read through
    /// the indexes of migration 0021; with `only`, among those purchases.
    private func dueFlips(
        since: Timestamp, until: Timestamp, limit: Int, only: [String]?, on transaction: DatabaseTransaction
    ) async throws -> [DueFlip] {
        let target = try requiredTarget
        let policy = entitlement
        let terms = try Self.json(policy.nonRenewingTerms)
        let (sinceMs, untilMs) = (since.millisecondsSince1970, until.millisecondsSince1970)
        // Purchases that never entitle under the rule have no moment: sandbox ones when the app
        // says so, subscriptions that billing retry keeps entitled.
        let neverEntitled = target.environment == .sandbox && !policy.sandboxEntitles
        let columns = Self.purchaseColumns.split(separator: ",").map { "p." + $0.trimmingCharacters(in: .whitespacesAndNewlines) }
            .joined(separator: ", ")
        let rows = try await transaction.query(
            """
            SELECT * FROM (
                SELECT \(unescaped: columns), GREATEST(p.expires_date_ms, p.grace_period_expires_date_ms) AS instant_ms FROM purchases p
                WHERE p.bundle_id = \(target.bundleId) AND p.environment = \(target.environment.rawValue) AND p.revocation_date_ms IS NULL
                  AND (p.expires_date_ms IS NOT NULL OR p.grace_period_expires_date_ms IS NOT NULL)
                  AND GREATEST(p.expires_date_ms, p.grace_period_expires_date_ms) > \(sinceMs)
                  AND GREATEST(p.expires_date_ms, p.grace_period_expires_date_ms) <= \(untilMs)
                  AND (p.product_type = 'Auto-Renewable Subscription'
                       OR (p.product_type = 'Non-Renewing Subscription' AND NOT (\(terms)::jsonb ? COALESCE(p.product_id, ''))))
                  AND NOT (p.product_type = 'Auto-Renewable Subscription' AND \(policy.billingRetryEntitles)
                           AND p.is_in_billing_retry_period IS TRUE)
                UNION ALL
                SELECT \(unescaped: columns), p.purchase_date_ms + t.term::bigint FROM purchases p
                JOIN jsonb_each_text(\(terms)::jsonb) AS t (product_id, term) ON t.product_id = p.product_id
                WHERE p.bundle_id = \(target.bundleId) AND p.environment = \(target.environment.rawValue) AND p.revocation_date_ms IS NULL
                  AND p.product_type = 'Non-Renewing Subscription'
                  AND p.purchase_date_ms > \(sinceMs) - t.term::bigint AND p.purchase_date_ms <= \(untilMs) - t.term::bigint
            ) AS due
            WHERE NOT \(neverEntitled) AND (\(only)::text[] IS NULL OR due.original_transaction_id = ANY(\(only)::text[]))
              AND NOT EXISTS (
                SELECT 1 FROM entitlement_instants i
                WHERE (i.bundle_id, i.environment, i.original_transaction_id, i.instant_ms)
                    = (due.bundle_id, due.environment, due.original_transaction_id, due.instant_ms))
            ORDER BY due.original_transaction_id, due.instant_ms
            LIMIT \(limit)
            """, logger: logger)
        var due: [DueFlip] = []
        for try await row in rows {
            let instant: Int64 = try NamedColumns(row)["instant_ms"]
            let before = try purchaseState(row, now: Timestamp(millisecondsSince1970: instant - 1))
            let after = try purchaseState(row, now: Timestamp(millisecondsSince1970: instant))
            let flipped = before.entitled == true && after.entitled == false
            due.append(
                DueFlip(
                    originalTransactionId: after.originalTransactionId, instant: instant,
                    change: flipped ? PurchaseChange(before: before, after: after) : nil))
        }
        return due
    }

    /// Records the moments; returns the keys of those no other writer had recorded.
    private func claim(_ due: [DueFlip], on transaction: DatabaseTransaction) async throws -> Set<String> {
        struct Instant: Encodable {
            var bundle_id: String
            var environment: String
            var original_transaction_id: String
            var instant_ms: Int64
        }
        let target = try requiredTarget
        let instants = due.map {
            Instant(
                bundle_id: target.bundleId, environment: target.environment.rawValue, original_transaction_id: $0.originalTransactionId,
                instant_ms: $0.instant)
        }
        let rows = try await transaction.query(
            """
            INSERT INTO entitlement_instants (bundle_id, environment, original_transaction_id, instant_ms)
            SELECT bundle_id, environment, original_transaction_id, instant_ms
            FROM jsonb_to_recordset(\(try Self.json(instants))::jsonb)
                AS i (bundle_id text, environment text, original_transaction_id text, instant_ms bigint)
            ORDER BY original_transaction_id, instant_ms
            ON CONFLICT DO NOTHING
            RETURNING original_transaction_id, instant_ms
            """, logger: logger)
        var claimed: Set<String> = []
        for try await (id, instant) in rows.decode((String, Int64).self) { claimed.insert("\(id) \(instant)") }
        return claimed
    }
}
