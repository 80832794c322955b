import AppStoreServer
import Foundation
import MockAppStore
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
                            originalTransactionId: "9200", renewalInfo: verified,
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
                transactions: [.init(verified)], updates: [.init(originalTransactionId: original)], before: before,
                origin: .init(source: .transactionHistory), on: connection)
        }
    }

}
