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

/// The handler against a real PostgreSQL: dedup, no regression, concurrency, forgeries.
@Suite struct NotificationHandlerTests {
    let app: TestApp
    init() throws { app = try TestApp() }

    var t0: Int64 { app.start + 86_400_000 }

    @Test func aGoodNotificationBecomesState() async throws {
        try await TestDatabase.with { db in
            let handler = try app.handler(db)
            let transaction = app.subscription(original: "1000", period: 0, signedDate: t0)
            let payload = try app.notification(
                .subscribed, .initialBuy, signedDate: t0, transaction: transaction,
                renewal: app.renewal(original: "1000", autoRenew: .on, signedDate: t0), status: .active)
            let result = try await handler.handle(signedPayload: payload, source: .webhook)
            #expect(result.outcome == .applied)
            #expect(result.change?.before == nil)
            let expected = PurchaseState(
                originalTransactionId: "1000", latestTransactionId: "1000", productId: "com.example.monthly", bundleId: TestApp.bundleId,
                environment: .production, purchaseDate: transaction.purchaseDate, expiresDate: transaction.expiresDate,
                revocationDate: nil, autoRenewStatus: 1, lastSignedDate: t0, status: 1, entitled: true)
            #expect(result.change?.after == expected)
            let stored = try await db.database.transaction { try await handler.store.purchaseStates(["1000"], on: $0)["1000"] }
            #expect(stored == expected)
            #expect(try await db.count("SELECT count(*) FROM notifications WHERE source = 'webhook' AND outcome = 'applied'") == 1)
            #expect(try await db.count("SELECT count(*) FROM transactions") == 1)
        }
    }

    @Test func theSameNotificationTwiceIsOneRowAndNoSecondEffect() async throws {
        try await TestDatabase.with { db in
            let handler = try app.handler(db)
            let payload = try app.notification(.didRenew, signedDate: t0, transaction: app.subscription(original: "2000", period: 1, signedDate: t0))
            #expect(try await handler.handle(signedPayload: payload, source: .webhook).outcome == .applied)
            let fingerprint = try await db.stateFingerprint()
            let again = try await handler.handle(signedPayload: payload, source: .history(runId: 7))
            #expect(again.outcome == .duplicate)
            #expect(again.change == nil)
            #expect(try await db.stateFingerprint() == fingerprint)
            #expect(try await db.count("SELECT count(*) FROM notifications") == 1)
        }
    }

    @Test func anOlderNotificationAfterANewerOneDoesNotRegress() async throws {
        try await TestDatabase.with { db in
            let handler = try app.handler(db)
            let renewalTime = t0 + 30 * 86_400_000
            let renewed = try app.notification(
                .didRenew, signedDate: renewalTime, transaction: app.subscription(original: "3000", period: 1, signedDate: renewalTime),
                renewal: app.renewal(original: "3000", autoRenew: .on, signedDate: renewalTime))
            let disabled = t0 + 10 * 86_400_000
            // Older: auto-renew switched off before the renewal (then back on, later, in reality).
            let older = try app.notification(
                .didChangeRenewalStatus, .autoRenewDisabled, signedDate: disabled,
                transaction: app.subscription(original: "3000", period: 0, signedDate: disabled),
                renewal: app.renewal(original: "3000", autoRenew: .off, signedDate: disabled))
            let newState = try #require(try await handler.handle(signedPayload: renewed, source: .webhook).change?.after)
            let late = try await handler.handle(signedPayload: older, source: .history(runId: 1))
            #expect(late.outcome == .stale)
            #expect(late.change?.after == newState)
            #expect(newState.latestTransactionId == "3000-1")
            #expect(newState.autoRenewStatus == 1)
            // The old transaction was still recorded: history is complete.
            #expect(try await db.count("SELECT count(*) FROM transactions WHERE original_transaction_id = '3000'") == 2)
        }
    }

    @Test func aStaleTransactionVersionDoesNotOverwriteANewerOne() async throws {
        try await TestDatabase.with { db in
            let handler = try app.handler(db)
            let refundTime = t0 + 5 * 86_400_000
            let refunded = app.subscription(original: "3500", period: 0, signedDate: refundTime, revocationDate: refundTime - 1000)
            _ = try await handler.handle(
                signedPayload: try app.notification(.refund, signedDate: refundTime, transaction: refunded), source: .webhook)
            let original = app.subscription(original: "3500", period: 0, signedDate: t0)
            let replay = try await handler.handle(
                signedPayload: try app.notification(.subscribed, .initialBuy, signedDate: t0, transaction: original), source: .history(runId: 1))
            #expect(replay.outcome == .stale)
            #expect(replay.change?.after.revocationDate == refundTime - 1000)
        }
    }

    @Test func refundRecordsTheRevocationAndRefundReversedClearsIt() async throws {
        try await TestDatabase.with { db in
            let handler = try app.handler(db)
            _ = try await handler.handle(
                signedPayload: try app.notification(
                    .subscribed, .initialBuy, signedDate: t0, transaction: app.subscription(original: "4000", period: 0, signedDate: t0)),
                source: .webhook)
            let refundTime = t0 + 86_400_000
            let refund = try await handler.handle(
                signedPayload: try app.notification(
                    .refund, signedDate: refundTime,
                    transaction: app.subscription(original: "4000", period: 0, signedDate: refundTime, revocationDate: refundTime - 5)),
                source: .webhook)
            #expect(refund.change?.after.revocationDate == refundTime - 5)
            let reversalTime = refundTime + 86_400_000
            let reversal = try await handler.handle(
                signedPayload: try app.notification(
                    .refundReversed, signedDate: reversalTime,
                    transaction: app.subscription(original: "4000", period: 0, signedDate: reversalTime)), source: .webhook)
            #expect(reversal.change?.after.revocationDate == nil)
            #expect(try await db.count("SELECT count(*) FROM transactions WHERE revocation_date_ms IS NOT NULL") == 0)
        }
    }

    @Test func aTestNotificationIsRecordedAndChangesNoState() async throws {
        try await TestDatabase.with { db in
            let handler = try app.handler(db)
            let payload = try app.authority.signer.sign(
                ResponseBodyV2DecodedPayload(
                    notificationType: .test, notificationUUID: UUID().uuidString, signedDate: t0,
                    data: NotificationData(appAppleId: TestApp.appAppleId, bundleId: TestApp.bundleId, environment: .production)))
            let result = try await handler.handle(signedPayload: payload, source: .webhook)
            #expect(result.outcome == .recorded)
            #expect(try await db.count("SELECT count(*) FROM notifications WHERE outcome = 'recorded'") == 1)
            #expect(try await db.count("SELECT count(*) FROM purchases") == 0)
            #expect(try await handler.handle(signedPayload: payload, source: .webhook).outcome == .duplicate)
        }
    }

    @Test func concurrentDuplicatesAreAppliedOnce() async throws {
        try await TestDatabase.with { db in
            let handler = try app.handler(db)
            let payload = try app.notification(.didRenew, signedDate: t0, transaction: app.subscription(original: "5000", period: 1, signedDate: t0))
            let outcomes = try await withThrowingTaskGroup(of: HandlingResult.Outcome.self) { group in
                for index in 0..<16 {
                    group.addTask { try await handler.handle(signedPayload: payload, source: index % 2 == 0 ? .webhook : .history(runId: 1)).outcome }
                }
                return try await group.reduce(into: [HandlingResult.Outcome]()) { $0.append($1) }
            }
            #expect(outcomes.filter { $0 == .applied }.count == 1)
            #expect(outcomes.filter { $0 == .duplicate }.count == 15)
            #expect(try await db.count("SELECT count(*) FROM notifications") == 1)
        }
    }

    @Test func concurrentNotificationsOfOnePurchaseConvergeToTheNewest() async throws {
        try await TestDatabase.with { db in
            let handler = try app.handler(db)
            let payloads = try (0..<12).map { period in
                let signed = t0 + Int64(period) * 30 * 86_400_000
                return try app.notification(
                    .didRenew, signedDate: signed,
                    transaction: app.subscription(original: "5500", period: period, signedDate: signed),
                    renewal: app.renewal(original: "5500", autoRenew: period == 11 ? .off : .on, signedDate: signed))
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for payload in payloads.shuffled() { group.addTask { _ = try await handler.handle(signedPayload: payload, source: .webhook) } }
                try await group.waitForAll()
            }
            let state = try await db.database.transaction { try await handler.store.purchaseStates(["5500"], on: $0)["5500"] }
            #expect(state?.latestTransactionId == "5500-11")
            #expect(state?.autoRenewStatus == 0)
            #expect(state?.lastSignedDate == t0 + 11 * 30 * 86_400_000)
        }
    }

    /// A replayed page can hold several notifications of one purchase, and the same one twice.
    @Test func aPageWithSeveralNotificationsOfOnePurchaseEndsAsOneByOneWould() async throws {
        let payloads = try (0..<6).map { period in
            let signed = t0 + Int64(period) * 30 * 86_400_000
            return try app.notification(
                .didRenew, signedDate: signed,
                transaction: app.subscription(original: "5800", period: period, signedDate: signed),
                renewal: app.renewal(original: "5800", autoRenew: period == 5 ? .off : .on, signedDate: signed),
                status: .active)
        }
        let oneByOne = try await TestDatabase.with { db in
            let handler = try app.handler(db)
            for payload in payloads { _ = try await handler.handle(signedPayload: payload, source: .webhook) }
            return try await db.database.transaction { try await handler.store.purchaseStates(["5800"], on: $0)["5800"] }
        }
        try await TestDatabase.with { db in
            let handler = try app.handler(db)
            var verified: [VerifiedNotification] = []
            for payload in (payloads + [payloads[2]]).shuffled() { verified.append(try await handler.verify(signedPayload: payload)) }
            let page = verified
            let ledger = RunLedger(database: db.database)
            let run = try await ledger.createRun(
                kind: .manual, app: AppTarget(bundleId: TestApp.bundleId, environment: .production), window: TimeWindow(milliseconds: 0..<1),
                dryRun: false, options: .init(), shards: [], holder: "test")
            let results = try await db.database.transaction { connection in
                let results = try await handler.apply(page, source: .history(runId: run.runId), on: connection)
                try await ledger.recordChanges(runId: run.runId, results.compactMap(\.change), on: connection)
                return results
            }
            #expect(results.filter { $0.outcome == .duplicate }.count == 1)
            #expect(results.filter { $0.outcome == .applied }.count == 6)
            let batched = try await db.database.transaction { try await handler.store.purchaseStates(["5800"], on: $0)["5800"] }
            #expect(batched == oneByOne)
            #expect(batched?.latestTransactionId == "5800-5")
            #expect(batched?.autoRenewStatus == 0)
            #expect(try await db.count("SELECT count(*) FROM transactions WHERE original_transaction_id = '5800'") == 6)
            #expect(try await db.count("SELECT count(*) FROM run_changes") == 1)
        }
    }

    @Test func forgedAndForeignNotificationsWriteNothing() async throws {
        try await TestDatabase.with { db in
            let handler = try app.handler(db)
            let transaction = app.subscription(original: "6000", period: 0, signedDate: t0)
            let stranger = try SigningCertificateAuthority()
            let genuine = try app.notification(.subscribed, signedDate: t0, transaction: transaction)
            var tampered = genuine.split(separator: ".").map(String.init)
            tampered[1] = String(try app.notification(.subscribed, signedDate: t0 + 1, transaction: transaction).split(separator: ".")[1])
            // A genuine outer notification carrying a transaction signed by someone else.
            let forgedInner = try app.authority.signer.sign(
                ResponseBodyV2DecodedPayload(
                    notificationType: .didRenew, notificationUUID: UUID().uuidString, signedDate: t0,
                    data: NotificationData(
                        appAppleId: TestApp.appAppleId, bundleId: TestApp.bundleId, environment: .production,
                        signedTransactionInfo: try stranger.signer.sign(transaction))))
            let forgeries: [(String, VerificationError.Reason)] = [
                (tampered.joined(separator: "."), .invalidSignature),
                (try app.notification(.subscribed, signedDate: t0, transaction: transaction, signer: stranger.signer), .untrustedRoot),
                (try app.notification(.subscribed, signedDate: t0, transaction: transaction, bundleId: "com.other"), .invalidBundleId),
                (try app.notification(.subscribed, signedDate: t0, transaction: transaction, appAppleId: 1), .invalidAppAppleId),
                (try app.notification(.subscribed, signedDate: t0, transaction: transaction, environment: .sandbox), .invalidEnvironment),
                (forgedInner, .untrustedRoot),
                ("not a jws", .malformedJWS),
            ]
            let fingerprint = try await db.stateFingerprint()
            for (payload, reason) in forgeries {
                let error = await #expect(throws: VerificationError.self) {
                    _ = try await handler.handle(signedPayload: payload, source: .webhook)
                }
                #expect(error?.reason == reason)
            }
            #expect(try await db.stateFingerprint() == fingerprint)
        }
    }

    /// A dry run writes its own copies: the real tables never change, and the copies evolve as
    /// the real rows would (a second page sees the first page's effects).
    @Test func aDryRunWritesOnlyItsShadowCopies() async throws {
        try await TestDatabase.with { db in
            let handler = try app.handler(db)
            let first = try app.notification(.subscribed, signedDate: t0, transaction: app.subscription(original: "7000", period: 0, signedDate: t0))
            _ = try await handler.handle(signedPayload: first, source: .webhook)
            let fingerprint = try await db.stateFingerprint()
            let shadow = try await ShadowSchema.create(runId: 999, on: db.database)
            let dry = handler.shadowed(by: shadow)
            let renewed = t0 + 30 * 86_400_000
            let renewal = try app.notification(
                .didRenew, signedDate: renewed, transaction: app.subscription(original: "7000", period: 1, signedDate: renewed))
            let result = try await dry.handle(signedPayload: renewal, source: .history(runId: 999))
            #expect(result.outcome == .applied)
            #expect(result.change?.before?.latestTransactionId == "7000")
            #expect(result.change?.after.latestTransactionId == "7000-1")
            // The copy remembers it: the same notification again is a duplicate, an older one is stale.
            #expect(try await dry.handle(signedPayload: renewal, source: .history(runId: 999)).outcome == .duplicate)
            let older = try app.notification(
                .didChangeRenewalStatus, .autoRenewDisabled, signedDate: renewed - 1000,
                transaction: app.subscription(original: "7000", period: 0, signedDate: renewed - 1000))
            #expect(try await dry.handle(signedPayload: older, source: .history(runId: 999)).outcome == .stale)
            #expect(try await db.stateFingerprint() == fingerprint)
            #expect(try await db.count("SELECT count(*) FROM reconciler_dry_run_999.notifications") == 2)
            try await shadow.drop(on: db.database)
            #expect(try await db.count("SELECT count(*) FROM pg_namespace WHERE nspname = 'reconciler_dry_run_999'") == 0)
        }
    }
}
