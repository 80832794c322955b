import Foundation
import MockAppStore
import NIOHTTP1
import PostgresNIO
import TestSupport
import Testing

/// The app API's refreshes against a mock whose API lags the App Store's events
/// (`apiLagMilliseconds`, as Apple's API is eventually consistent): a refresh right after a refund
/// answers what Apple answered, the purchase unrevoked, and says `fresh: true`, since `fresh` means
/// Apple answered for this request, not that Apple's answer was current (nothing in Apple's
/// answer tells the two apart); once the lag has passed, a refresh shows the refund.
@Suite struct AppAPILagTests {
    static func setLag(_ milliseconds: Int64, baseURL: String) async throws {
        let reply = try await HTTP.request(.POST, "\(baseURL)/mock/faults", body: Data("{\"apiLagMilliseconds\":\(milliseconds)}".utf8))
        #expect(reply.status == 200)
    }

    @Test func aRefreshWithinAppleLagAnswersTheStaleStateAndPastItTheRefund() async throws {
        try await TestDatabase.with { db in
            try await MockAppStore.withRunning(.init(scenario: .init(seed: 39, customers: 6))) { mock, baseURL in
                try await AppAPIRefreshTests.withAPI(db, mock: mock, baseURL: baseURL, clock: ManualClock()) { api, _ in
                    let base = AppAPIRefreshTests.base(mock)
                    // A purchase read from Apple once, not revoked.
                    var chosen: [String: Any]?
                    for original in AppAPIRefreshTests.originals(mock) {
                        let reply = try await api.get("\(base)&originalTransactionId=\(original)&refresh=always&timeout=30s")
                        #expect(reply.status == 200, "\(reply.text)")
                        if let purchase = reply.purchases.first, purchase["revocationDate"] is NSNull, purchase["status"] as? Int == 1 {
                            chosen = purchase
                            break
                        }
                    }
                    let purchase = try #require(chosen)
                    let original = try #require(purchase["originalTransactionId"] as? String)
                    let latest = try #require(purchase["latestTransactionId"] as? String)
                    @Sendable func revoked() async throws -> Int {
                        try await db.count(
                            "SELECT count(*) FROM purchases WHERE original_transaction_id = \(original) AND revocation_date_ms IS NOT NULL")
                    }

                    // Apple's API lags an hour behind; the customer is refunded and the webhook misses it.
                    try await Self.setLag(3_600_000, baseURL: baseURL)
                    let refunded = try await HTTP.request(.POST, "\(baseURL)/mock/refund?transactionId=\(latest)")
                    #expect(refunded.status == 200, "\(String(decoding: refunded.body, as: UTF8.self))")

                    let stale = try await api.get("\(base)&originalTransactionId=\(original)&refresh=always&timeout=30s")
                    #expect(stale.status == 200, "\(stale.text)")
                    #expect(stale.purchases.count == 1)
                    #expect(stale.purchases.first?["revocationDate"] is NSNull, "\(stale.text)")
                    #expect(stale.purchases.first?["status"] as? Int == 1, "\(stale.text)")
                    #expect(stale.purchases.first?["fresh"] as? Bool == true, "Apple answered, if with its lagging state")
                    #expect(try await revoked() == 0)

                    // The lag has passed (the mock's `now - lag` is past the refund): a refresh shows it.
                    try await Self.setLag(0, baseURL: baseURL)
                    let fresh = try await api.get("\(base)&originalTransactionId=\(original)&refresh=always&timeout=30s")
                    #expect(fresh.status == 200, "\(fresh.text)")
                    #expect(fresh.purchases.first?["revocationDate"] is NSNumber, "\(fresh.text)")
                    #expect(fresh.purchases.first?["status"] as? Int == 5, "\(fresh.text)")
                    #expect(fresh.purchases.first?["entitled"] as? Bool == false, "\(fresh.text)")
                    #expect(fresh.purchases.first?["fresh"] as? Bool == true)
                    #expect(try await revoked() == 1)
                }
            }
        }
    }
}
