import AppStoreServer
import Foundation
import MockAppStore
import NIOHTTP1
import PostgresNIO
import ReconcilerDomain
import ReconcilerShared
import Testing

@testable import Reconciler
@testable import ReconcilerStore

/// What the store decides about a purchase that Apple's data leaves open: how long a non-renewing
/// subscription entitles, which of a snapshot and a notification wins, and when a customer is due.
@Suite struct PurchaseStateRulesTests {
    let app: TestApp
    init() throws { app = try TestApp() }

    // MARK: Non-renewing subscriptions (review 18.2)

    /// Apple sends no expiry for a non-renewing subscription: with the app's term it entitles for
    /// that long from its purchase, without one `entitled` is unknown, never "for ever"; a product
    /// type that is missing or unknown never entitles.
    @Test func entitlementOfProductsWithoutAnExpiry() {
        let now: Int64 = 1_800_000_000_000
        let day: Int64 = 86_400_000
        let policy = EntitlementPolicy(nonRenewingTerms: ["com.example.pass.30d": 30 * day])
        func pass(bought: Int64, product: String = "com.example.pass.30d") -> Entitlement.Facts {
            .init(productType: "Non-Renewing Subscription", productId: product, purchaseDate: bought)
        }
        #expect(Entitlement.isEntitled(pass(bought: now - 14 * 30 * day), at: now, policy: policy) == false)
        #expect(Entitlement.isEntitled(pass(bought: now - 10 * day), at: now, policy: policy) == true)
        #expect(Entitlement.isEntitled(pass(bought: now - 10 * day, product: "com.example.pass.other"), at: now, policy: policy) == nil)
        #expect(Entitlement.isEntitled(pass(bought: now - 10 * day), at: now) == nil)
        #expect(Entitlement.isEntitled(.init(productType: nil, purchaseDate: now - day), at: now) == false)
        #expect(Entitlement.isEntitled(.init(productType: "Future Product Type", purchaseDate: now - day), at: now) == false)
        #expect(Entitlement.isEntitled(.init(productType: "Non-Consumable", purchaseDate: now - 400 * day), at: now) == true)
        #expect(
            EntitlementPolicy.parseTerms("com.example.pass.30d=30d, com.example.pass.8h=8h") == [
                "com.example.pass.30d": 30 * day, "com.example.pass.8h": 8 * 3_600_000,
            ])
        #expect(EntitlementPolicy.parseTerms("com.example.pass.30d") == nil)
        #expect(EntitlementPolicy.formatTerms(["b": 8 * 3_600_000, "a": 30 * day]) == "a=30d,b=8h")
    }

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

    // MARK: A snapshot against a notification (review 18.3)

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

    /// The other order: the snapshot (signed at read time, unrevoked) is stored first, then the
    /// REFUND notification Apple signed a few seconds before it arrives; the revocation wins, and a
    /// snapshot signed after the margin is believed again.
    @Test func aRefundNotificationWinsOverASnapshotReadMomentsAfterIt() async throws {
        try await TestDatabase.with { db in
            let handler = try app.handler(db)
            let refundedAt = app.start + 20 * 86_400_000
            let unrevoked = app.subscription(original: "9100", period: 0, signedDate: refundedAt + 3000)
            try await write(snapshot: unrevoked, handler: handler, db: db)
            let revoked = app.subscription(original: "9100", period: 0, signedDate: refundedAt, revocationDate: refundedAt - 1)
            let refund = try app.notification(.refund, signedDate: refundedAt, transaction: revoked, status: .revoked)
            #expect(try await handler.handle(signedPayload: refund, source: .webhook).outcome == .applied)
            let state = try await db.database.transaction { try await handler.store.purchaseStates(["9100"], on: $0)["9100"] }
            #expect(state?.revocationDate == refundedAt - 1)
            let recheck = try await db.count("SELECT recheck_at_ms FROM purchases WHERE original_transaction_id = '9100'")
            #expect(Int64(recheck) == refundedAt + PurchaseStore.snapshotMarginMilliseconds + 1)
            // Within the margin another snapshot still cannot clear it; after the margin it can.
            try await write(snapshot: app.subscription(original: "9100", period: 0, signedDate: refundedAt + 60_000), handler: handler, db: db)
            #expect(try await db.count("SELECT count(*) FROM transactions WHERE transaction_id = '9100' AND revocation_date_ms IS NOT NULL") == 1)
            let later = refundedAt + PurchaseStore.snapshotMarginMilliseconds + 60_000
            try await write(snapshot: app.subscription(original: "9100", period: 0, signedDate: later), handler: handler, db: db)
            #expect(try await db.count("SELECT count(*) FROM transactions WHERE transaction_id = '9100' AND revocation_date_ms IS NULL") == 1)
        }
    }

    /// A status and renewal info read from Get All Subscription Statuses moments after a
    /// notification (expired, auto-renew off) do not move the purchase back to active.
    @Test func aLaggingStatusDoesNotMoveAStatusBackwards() async throws {
        try await TestDatabase.with { db in
            let handler = try app.handler(db)
            let at = app.start + 25 * 86_400_000
            let expired = try app.notification(
                .expired, .voluntary, signedDate: at, transaction: app.subscription(original: "9200", period: 0, signedDate: at),
                renewal: app.renewal(original: "9200", autoRenew: .off, signedDate: at), status: .expired)
            #expect(try await handler.handle(signedPayload: expired, source: .webhook).outcome == .applied)
            let renewal = try app.authority.signer.sign(app.renewal(original: "9200", autoRenew: .on, signedDate: at + 2000))
            let verified = try await handler.verifier.verifyRenewalInfo(renewal)
            try await db.database.transaction { connection in
                try await handler.store.lock(purchases: ["9200"], on: connection)
                let before = try await handler.store.purchaseStates(["9200"], on: connection)
                _ = try await handler.store.write(
                    transactions: [],
                    updates: [
                        .init(
                            originalTransactionId: "9200", environment: "Production", renewalInfo: verified,
                            status: .init(status: .active, signedDate: at + 2000))
                    ], before: before, origin: .init(source: .statusRefresh), on: connection)
            }
            let state = try await db.database.transaction { try await handler.store.purchaseStates(["9200"], on: $0)["9200"] }
            #expect(state?.status == Status.expired.rawValue)
            #expect(state?.autoRenewStatus == AutoRenewStatus.off.rawValue)
            let recheck = try await db.count("SELECT recheck_at_ms FROM purchases WHERE original_transaction_id = '9200'")
            #expect(Int64(recheck) == at + PurchaseStore.snapshotMarginMilliseconds + 1)
        }
    }

    /// Stores a transaction as phase 2 does (a snapshot from Get Transaction History).
    func write(snapshot transaction: JWSTransactionDecodedPayload, handler: NotificationHandler, db: TestDatabase) async throws {
        let verified = try await handler.verifier.verifyTransaction(try app.authority.signer.sign(transaction))
        let original = transaction.originalTransactionId ?? ""
        try await db.database.transaction { connection in
            try await handler.store.lock(purchases: [original], on: connection)
            let before = try await handler.store.purchaseStates([original], on: connection)
            _ = try await handler.store.write(
                transactions: [.init(verified)], updates: [.init(originalTransactionId: original, environment: "Production")], before: before,
                origin: .init(source: .transactionHistory), on: connection)
        }
    }

    // MARK: Due customers (review 18.12)

    /// The due-customer query of every hourly run reads an index: with a million purchases, its
    /// plan has no sequential scan, and it finds exactly the purchases that fell due.
    @Test func theDueQueryReadsAnIndexAtAMillionPurchases() async throws {
        // A cluster of its own: loading a million rows is a long transaction, and the change feed of
        // every other test's database waits for the oldest transaction of its cluster.
        try await PrivateCluster.with { cluster in
            try await TestDatabase.with(server: cluster.url) { db in try await checkDueQueryPlan(db) }
        }
    }

    func checkDueQueryPlan(_ db: TestDatabase) async throws {
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        // A million subscriptions checked after their last date fell due, and 25 that fell due since.
        try await db.execute(
            """
            INSERT INTO purchases (original_transaction_id, bundle_id, environment, product_type, status, expires_date_ms, renewal_date_ms,
                history_checked_at_ms, last_signed_date_ms)
            SELECT 'p' || i, 'com.example.one', 'Production', 'Auto-Renewable Subscription', 1,
                   \(now) + (i % 1000 + 1)::bigint * 3600000, \(now) + (i % 1000 + 1)::bigint * 3600000, \(now) - 60000, \(now) - 86400000
            FROM generate_series(1, 1000000) AS i
            """)
        try await db.execute(
            """
            INSERT INTO purchases (original_transaction_id, bundle_id, environment, product_type, status, expires_date_ms, history_checked_at_ms)
            SELECT 'due' || i, 'com.example.one', 'Production', 'Auto-Renewable Subscription', 1, \(now) - 1000 * i, \(now) - 7200000
            FROM generate_series(1, 25) AS i
            """)
        try await db.execute("ANALYZE purchases")
        let store = PurchaseStore(logger: TestDatabase.logger, target: AppTarget(bundleId: "com.example.one", environment: .production))
        let due = try await db.database.transaction {
            try await store.dueAnchors(windowEnd: now, all: false, on: $0)
        }
        #expect(due == (1...25).map { "due\($0)" }.sorted())
        let plan = try await db.database.transaction { connection in
            try await store.explainDueAnchors(windowEnd: now, on: connection)
        }
        #expect(!plan.contains("Seq Scan"), "\(plan)")
        #expect(plan.contains("purchases_next_due_idx"), "\(plan)")
    }
}
