import Foundation
import PostgresNIO
package import ReconcilerDomain
import ReconcilerShared

/// What a run saw and changed: notification counts by type and outcome, and the purchases it changed.
extension RunLedger {
    /// Adds notification outcome counts by `TYPE/SUBTYPE` (`rejected` for refused values).
    package func addCounts(
        runId: Int64, _ outcomes: [(typeAndSubtype: String, outcome: CountedOutcome)], on transaction: DatabaseTransaction
    ) async throws {
        struct Key: Hashable, Encodable {
            var type_and_subtype: String
            var outcome: String
        }
        struct Row: Encodable {
            var type_and_subtype: String
            var outcome: String
            var count: Int
        }
        let counts = Dictionary(grouping: outcomes.map { Key(type_and_subtype: $0.typeAndSubtype, outcome: $0.outcome.rawValue) }) { $0 }
            .map { Row(type_and_subtype: $0.key.type_and_subtype, outcome: $0.key.outcome, count: $0.value.count) }
            .sorted { ($0.type_and_subtype, $0.outcome) < ($1.type_and_subtype, $1.outcome) }
        guard !counts.isEmpty else { return }
        try await transaction.query(
            """
            INSERT INTO run_counts (run_id, type_and_subtype, outcome, count)
            SELECT \(runId), type_and_subtype, outcome, count FROM jsonb_populate_recordset(NULL::run_counts, \(try PurchaseStore.json(counts))::jsonb)
            ON CONFLICT (run_id, type_and_subtype, outcome) DO UPDATE SET count = run_counts.count + EXCLUDED.count
            """, logger: logger)
    }

    /// Records purchases that changed: the first `before` is kept, `after` is the latest.
    package func recordChanges(runId: Int64, _ changes: [PurchaseChange], on transaction: DatabaseTransaction) async throws {
        var byPurchase: [String: PurchaseChange] = [:]
        for change in changes where change.isChange {
            let id = change.after.originalTransactionId
            byPurchase[id] = PurchaseChange(before: byPurchase[id].map(\.before) ?? change.before, after: change.after)
        }
        guard !byPurchase.isEmpty else { return }
        struct Row: Encodable {
            var original_transaction_id: String
            var before_state: PurchaseState?
            var after_state: PurchaseState
        }
        let rows = byPurchase.keys.sorted().map {
            Row(original_transaction_id: $0, before_state: byPurchase[$0]!.before, after_state: byPurchase[$0]!.after)
        }
        try await transaction.query(
            """
            INSERT INTO run_changes (run_id, original_transaction_id, before_state, after_state)
            SELECT \(runId), original_transaction_id, before_state, after_state
            FROM jsonb_populate_recordset(NULL::run_changes, \(try PurchaseStore.json(rows))::jsonb)
            ON CONFLICT (run_id, original_transaction_id) DO UPDATE SET after_state = EXCLUDED.after_state
            """, logger: logger)
    }

    /// A run's notification counts by `TYPE/SUBTYPE` and outcome.
    package func counts(runId: Int64) async throws -> [String: [CountedOutcome: Int]] {
        try await read { [logger] transaction in
            let rows = try await transaction.query(
                "SELECT type_and_subtype, outcome, count FROM run_counts WHERE run_id = \(runId)", logger: logger)
            var result: [String: [CountedOutcome: Int]] = [:]
            for try await (type, outcome, count) in rows.decode((String, String, Int).self) {
                result[type, default: [:]][try ReconcilerError.stored(outcome, in: "run_counts.outcome", as: CountedOutcome.self)] = count
            }
            return result
        }
    }

    /// How many purchases a run created and how many it changed (as ``changes(runId:limit:)``
    /// counts a change), counted in the database: an import of a million customers has as many.
    package func changeCounts(runId: Int64) async throws -> (created: Int, changed: Int) {
        try await read { [logger] transaction in
            let rows = try await transaction.query(
                """
                SELECT count(*) FILTER (WHERE before_state IS NULL), count(*) FILTER (WHERE before_state IS NOT NULL) FROM run_changes
                WHERE run_id = \(runId)
                  AND before_state - 'entitled' - 'lastSignedDate' IS DISTINCT FROM after_state - 'entitled' - 'lastSignedDate'
                """, logger: logger)
            for try await (created, changed) in rows.decode((Int, Int).self) { return (created, changed) }
            return (0, 0)
        }
    }

    package func changes(runId: Int64) async throws -> [PurchaseChange] {
        try await changes(runId: runId, limit: nil).changes
    }

    /// The purchases a run changed, by originalTransactionId, at most `limit` of them, and how many
    /// there are in all. A purchase changed as the change feed counts it
    /// (``PurchaseChange/changesPurchase``): `entitled` (judged moments apart) and `lastSignedDate`
    /// (which moves with every notification) aside, so a dry run predicts the feed's purchase rows.
    package func changes(runId: Int64, limit: Int?) async throws -> (changes: [PurchaseChange], total: Int) {
        try await read { [logger] transaction in
            let rows = try await transaction.query(
                """
                SELECT before_state::text, after_state::text, count(*) OVER () FROM run_changes
                WHERE run_id = \(runId)
                  AND before_state - 'entitled' - 'lastSignedDate' IS DISTINCT FROM after_state - 'entitled' - 'lastSignedDate'
                ORDER BY original_transaction_id
                LIMIT \(limit)
                """, logger: logger)
            var result: [PurchaseChange] = []
            var total = 0
            let decoder = JSONDecoder()
            for try await (before, after, count) in rows.decode((String?, String, Int).self) {
                total = count
                result.append(
                    PurchaseChange(
                        before: try before.map { try decoder.decode(PurchaseState.self, from: Data($0.utf8)) },
                        after: try decoder.decode(PurchaseState.self, from: Data(after.utf8))))
            }
            return (result, total)
        }
    }
}
