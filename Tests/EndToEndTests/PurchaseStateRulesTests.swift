import AppStoreServer
import Foundation
import NIOHTTP1
import PostgresNIO
import ReconcilerDomain
import ReconcilerShared
import TestSupport
import Testing

@testable import Reconciler
@testable import ReconcilerStore

/// What the store decides about a purchase that Apple's data leaves open: how long a non-renewing
/// subscription entitles, which of a snapshot and a notification wins, and when a customer is due.
@Suite struct PurchaseStateRulesTests {
    let app: TestApp
    init() throws { app = try TestApp() }

    /// The mock sells season passes (a non-renewing subscription of one period), one of them bought
    /// fourteen periods ago, and knows their term itself; its ground truth is computed apart from the
    /// reconciler's rule. With the term the mock's `reconciler.env` gives, `export` equals the truth;
    /// without it, the passes are `entitled: null`, never true for ever.
    @Test func aSeasonPassLastsItsTermAndIsUnknownWithoutOne() async throws {
        try await Rehearsal.with(customers: 40, seed: 83) { rehearsal in
            let run = try await rehearsal.runWindow()
            #expect(run.status == 0, "\(run.stdout)\n\(run.stderr)")
            let export = try await rehearsal.export(), truth = try await rehearsal.truth()
            #expect(export == truth, "\(Rehearsal.difference(export, truth))")
            let passes = try Self.states(truth).filter { $0.productId == "com.example.pass.season" }
            #expect(passes.contains { $0.entitled == false && $0.revocationDate == nil }, "a long expired pass")
            #expect(passes.contains { $0.entitled == true }, "a running pass")

            let unconfigured = try await rehearsal.reconciler(
                ["export", "--at", String(Rehearsal.moment)], environment: ["RECONCILER_NON_RENEWING_TERMS": ""])
            let states = try Self.states(unconfigured.stdout)
            let exportedPasses = states.filter { $0.productId == "com.example.pass.season" }
            #expect(exportedPasses.count == passes.count)
            #expect(exportedPasses.allSatisfy { $0.entitled == nil || $0.revocationDate != nil }, "\(exportedPasses)")
            #expect(unconfigured.stdout.contains("\"entitled\":null"))
        }
    }

    static func states(_ lines: String) throws -> [PurchaseState] {
        try lines.split(separator: "\n").map { try JSONDecoder().decode(PurchaseState.self, from: Data($0.utf8)) }
    }

    // MARK: A snapshot against a notification

    /// Apple's API lags a refund: a read of the customer's history right after the live REFUND
    /// notification returns the transaction unrevoked, signed later. The notification's revocation
    /// stays, and the purchase is due for another read once the margin has passed.
    @Test func aLaggingSnapshotNeverClearsARefundANotificationApplied() async throws {
        try await Rehearsal.with(customers: 30, seed: 85) { rehearsal in
            let run = try await rehearsal.runWindow()
            #expect(run.status == 0, "\(run.stderr)")
            let truth = try Self.states(try await rehearsal.truth())
            let purchase = try #require(truth.first { $0.productId == "com.example.lifetime" && $0.revocationDate == nil })
            let transactionId = try #require(purchase.latestTransactionId)
            try await rehearsal.setFaults(["apiLagMilliseconds": 120_000])
            let refund = try await HTTP.request(.POST, "\(rehearsal.mockURL)/mock/refund?transactionId=\(transactionId)")
            #expect(refund.status == 200, "\(String(decoding: refund.body, as: UTF8.self))")
            try await eventually("the live REFUND applied") {
                try await rehearsal.db.count(
                    "SELECT count(*) FROM purchases WHERE original_transaction_id = \(purchase.originalTransactionId) AND revocation_date_ms IS NOT NULL"
                ) == 1
            }
            // A read of the customer's history now gets the transaction as it was before the refund.
            let repair = try await rehearsal.reconciler(["repair", "--transaction-id", transactionId])
            #expect(repair.status == 0, "\(repair.stdout)\n\(repair.stderr)")
            #expect(
                try await rehearsal.db.count(
                    "SELECT count(*) FROM transactions WHERE transaction_id = \(transactionId) AND revocation_date_ms IS NOT NULL AND from_notification"
                )
                    == 1)
            let exported = try Self.states(try await rehearsal.reconciler(["export"]).stdout).first {
                $0.originalTransactionId == purchase.originalTransactionId
            }
            #expect(exported?.revocationDate != nil, "\(String(describing: exported))")
            #expect(exported?.entitled == false)
            // Read again once the margin has passed: the purchase's next due time is then.
            let signed = try await rehearsal.db.count(
                "SELECT signed_date_ms FROM transactions WHERE transaction_id = \(transactionId)")
            #expect(
                try await rehearsal.db.count(
                    """
                    SELECT count(*) FROM purchases WHERE original_transaction_id = \(purchase.originalTransactionId)
                      AND recheck_at_ms = \(Int64(signed) + PurchaseStore.snapshotMarginMilliseconds + 1) AND next_due_ms = recheck_at_ms
                    """) == 1)
        }
    }
}
