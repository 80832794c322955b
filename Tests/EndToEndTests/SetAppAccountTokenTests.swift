import Foundation
import PostgresNIO
import TestSupport
import Testing

/// `reconciler set-app-account-token` through real processes against the mock over HTTP, with a
/// real PostgreSQL: what it refuses without asking Apple, each of Apple's refusals by its code,
/// Apple failing, and a token set and read back so `export` shows it.
@Suite struct SetAppAccountTokenTests {
    static let token = "7e3fb20b-4cdb-47cc-936d-99d65f608138"

    @Test func setsTheTokenThatExportThenShowsAndNamesApplesErrors() async throws {
        try await Rehearsal.with(customers: 60, seed: 351, outageHoursAgo: (16, 0.02)) { rehearsal in
            let run = try await rehearsal.runWindow()
            #expect(run.status == 0, "\(run.stderr)")
            func one(_ sql: PostgresQuery) async throws -> String {
                try #require(try await rehearsal.db.strings(sql).first, "none: \(sql.sql)")
            }
            let renewed = """
                SELECT original_transaction_id FROM transactions
                WHERE in_app_ownership_type = 'PURCHASED' AND product_type = 'Auto-Renewable Subscription'
                GROUP BY original_transaction_id HAVING count(*) > 1 ORDER BY original_transaction_id
                """
            let subscription = try await one(PostgresQuery(unsafeSQL: renewed + " LIMIT 1"))
            let other = try await one(PostgresQuery(unsafeSQL: renewed + " DESC LIMIT 1"))
            #expect(subscription != other)
            let later = try await one(
                "SELECT transaction_id FROM transactions WHERE original_transaction_id = \(other) AND transaction_id <> original_transaction_id LIMIT 1"
            )
            let family = try await one(
                "SELECT transaction_id FROM transactions WHERE in_app_ownership_type = 'FAMILY_SHARED' AND transaction_id = original_transaction_id LIMIT 1"
            )
            let appTransactionId = try await one("SELECT app_transaction_id FROM transactions WHERE app_transaction_id IS NOT NULL LIMIT 1")
            func set(_ id: String, _ token: String = Self.token) async throws -> ProcessResult {
                try await rehearsal.reconciler(["set-app-account-token", "--original-transaction-id", id, "--app-account-token", token])
            }

            // Refused before any request: a token that is not a UUID, an ID the store knows as a
            // later transaction, a Family Sharing purchase the store knows.
            try await rehearsal.resetMockStatistics()
            for (id, token, why) in [
                (subscription, "not-a-uuid", "is not a UUID"), (later, Self.token, "pass --original-transaction-id \(other)"),
                (family, Self.token, "Family Sharing"),
            ] {
                let refused = try await set(id, token)
                #expect(refused.status == 1 && refused.stderr.contains(why), "\(id): \(refused.stdout)\(refused.stderr)")
            }
            let untouched = try await rehearsal.mockStatistics()
            #expect((untouched["requests"] as? [String: Int])?["Set App Account Token"] == nil, "a refused token reached the App Store")

            // What the store does not know reaches Apple, which refuses it by code: exit 1.
            try await rehearsal.db.execute("DELETE FROM transactions WHERE transaction_id IN (\(later), \(family))")
            for (id, code) in [
                (later, "4000187 TransactionIdIsNotOriginalTransactionIdError"), (family, "4000185 FamilyTransactionNotSupportedError"),
                (appTransactionId, "4000048 AppTransactionIdNotSupportedError"),
                ("2000999999999999", "4040005 OriginalTransactionIdNotFoundError"),
            ] {
                let refused = try await set(id)
                #expect(refused.status == 1 && refused.stderr.contains("errorCode \(code)"), "\(id): \(refused.stdout)\(refused.stderr)")
            }

            // Apple failing: exit 2, run it again.
            try await rehearsal.setFaults(["serverErrorRate": 1.0])
            let failing = try await set(subscription)
            #expect(failing.status == 2 && failing.stderr.contains("5000001"), "\(failing.stdout)\(failing.stderr)")
            try await rehearsal.setFaults([:])

            // Set: Apple puts it on the latest transaction; the read after it brings it to `export`.
            let done = try await set(subscription)
            #expect(done.status == 0, "\(done.stdout)\(done.stderr)")
            #expect(done.stdout.contains("`export` shows it"), "\(done.stdout)")
            let line = try #require(
                try await rehearsal.export().split(separator: "\n").first { $0.contains(#""originalTransactionId":"\#(subscription)""#) })
            #expect(line.contains(#""appAccountToken":"\#(Self.token)""#), "\(line)")
            let truth = try #require(
                try await rehearsal.truth().split(separator: "\n").first { $0.contains(#""originalTransactionId":"\#(subscription)""#) })
            #expect(truth.contains(#""appAccountToken":"\#(Self.token)""#), "\(truth)")

            // Rate limited for longer than the client waits: exit 2, run it again (last: the
            // Retry-After closes the endpoint for every process of the app).
            try await rehearsal.setFaults(["rateLimitedRate": 1.0, "rateLimitedRetryAfterSeconds": 300])
            let limited = try await set(other)
            #expect(limited.status == 2 && limited.stderr.contains("run the same command again"), "\(limited.stdout)\(limited.stderr)")
        }
    }
}
