import AppStoreServer
import Foundation
import PostgresNIO
import ReconcilerDomain
import TestSupport
import Testing

@testable import Reconciler
@testable import ReconcilerStore

/// `reconciler prune` removes delivered forwarding rows and old change-feed rows, and its dry run
/// counts exactly what it then removes (the queue's gauges at a million rows: MillionRowPlanTests).
@Suite struct PruneTests {
    let app: TestApp
    init() throws { app = try TestApp() }

    /// The number a line `<prefix> N <rest>` of `output` gives, per line prefix and part.
    static func count(_ output: String, _ prefix: String, _ part: String) -> Int? {
        for line in output.split(separator: "\n") where line.hasPrefix(prefix + " ") {
            let words = line.dropFirst(prefix.count + 1).split(separator: " ")
            if words.count > 1, line.dropFirst(prefix.count + 1).dropFirst(words[0].count + 1).hasPrefix(part) { return Int(words[0]) }
        }
        return nil
    }

    /// Records `count` live notifications forwarded to `url`; returns their UUIDs.
    func record(_ count: Int, forwardingTo url: String, in db: TestDatabase) async throws -> [String] {
        try await app.recordForwarded(count, to: url, in: db, purchasePrefix: "prune")
    }

    @Test func pruneRemovesDeliveredForwardsAndOldChangesAndItsDryRunCountsWhatItRemoves() async throws {
        try await TestDatabase.with { db in
            let uuids = try await record(8, forwardingTo: "https://app.example.com/hook", in: db)
            // 0-3 delivered 10 days ago, 4 delivered an hour ago, 5 failed 10 days ago, 6-7 pending.
            try await db.execute(
                """
                UPDATE forward_queue SET status = 'delivered', delivered_at = now() - interval '10 days', attempts = 1
                WHERE notification_uuid = ANY(\(Array(uuids[0...3])))
                """)
            try await db.execute(
                "UPDATE forward_queue SET status = 'delivered', delivered_at = now() - interval '1 hour', attempts = 1 WHERE notification_uuid = \(uuids[4])"
            )
            try await db.execute(
                "UPDATE forward_queue SET status = 'failed', queued_at = now() - interval '10 days', attempts = 12 WHERE notification_uuid = \(uuids[5])"
            )
            // The feed: the first six changes are old, the last two are not. Pruning, like reading,
            // waits for transactions still running anywhere in the cluster (another test's).
            let store = PurchaseStore(logger: TestDatabase.logger)
            try await eventually("the feed readable") {
                try await db.database.transaction { try await store.changes(after: .start, limit: 100, on: $0) }.changes.count == 8
            }
            let ids = try await db.strings("SELECT change_id::text FROM purchase_changes ORDER BY xid, change_id")
            #expect(ids.count == 8)
            try await db.execute(
                "UPDATE purchase_changes SET changed_at = now() - interval '40 days' WHERE change_id::text = ANY(\(Array(ids[0...5])))")

            let before = try await db.stateFingerprint()
            let arguments = ["prune", "--changes-older-than", "30d", "--delivered-older-than", "7d"]
            let dry = try await db.reconciler(arguments + ["--dry-run"])
            #expect(dry.status == 0, "\(dry.stderr)")
            #expect(try await db.count("SELECT count(*) FROM forward_queue") == 8)
            #expect(try await db.count("SELECT count(*) FROM purchase_changes") == 8)
            #expect(try await db.stateFingerprint() == before)

            let real = try await db.reconciler(arguments)
            #expect(real.status == 0, "\(real.stderr)")
            #expect(Self.count(dry.stdout, "would prune", "changes") == 6, "\(dry.stdout)")
            #expect(Self.count(dry.stdout, "would prune", "delivered") == 4, "\(dry.stdout)")
            #expect(Self.count(real.stdout, "pruned", "changes") == Self.count(dry.stdout, "would prune", "changes"), "\(real.stdout)")
            #expect(Self.count(real.stdout, "pruned", "delivered") == Self.count(dry.stdout, "would prune", "delivered"), "\(real.stdout)")
            #expect(
                Set(try await db.strings("SELECT notification_uuid FROM forward_queue")) == Set(uuids[4...]),
                "only delivered rows older than 7 days go")
            #expect(try await db.strings("SELECT change_id::text FROM purchase_changes ORDER BY xid, change_id") == Array(ids[6...]))
            #expect(try await db.stateFingerprint() == before)

            // Nothing left to prune; the alias keeps its own words and exit code.
            let again = try await db.reconciler(arguments)
            #expect(again.status == 0 && Self.count(again.stdout, "pruned", "changes") == 0, "\(again.stdout)")
            let alias = try await db.reconciler(["changes", "--prune-before", "30d"])
            #expect(alias.status == 0 && alias.stdout.hasPrefix("pruned 0 changes"), "\(alias.stdout)")

            // Refused before anything is read or deleted: no part, an age under an hour, a bare number.
            for refused in [["prune"], ["prune", "--dry-run"], ["prune", "--changes-older-than", "30m"], ["prune", "--delivered-older-than", "7"]] {
                let result = try await db.reconciler(refused)
                #expect(result.status == 1, "\(refused): \(result.stderr)")
            }
        }
    }
}
