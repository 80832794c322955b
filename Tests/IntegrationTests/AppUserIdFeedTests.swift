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

/// The rows an `appUserId` writes, against the mock over HTTP into a real PostgreSQL: a customer's
/// first import creates each purchase with it (one feed row per purchase, not a second one to set
/// it); notifications of a known customer, live or replayed, carry it in the stored purchase and
/// on every feed row, their own `notification` rows included; the live webhook finds the customer
/// by the purchase's history as the import does, not only by `appTransactionId`; `export
/// --history` selects by it.
@Suite struct AppUserIdFeedTests {
    typealias Setup = AppUserIdTests.Setup

    /// Every readable row of the feed, of both kinds, after `position`.
    static func feed(_ db: TestDatabase, after position: PurchaseStore.FeedPosition = .start) async throws -> PurchaseStore.FeedBatch {
        try await AppUserIdTests.feed(db, after: position, kind: nil)
    }

    static func settle(_ db: TestDatabase) async throws { try await AppUserIdTests.settle(db, kind: nil) }

    @Test func aFirstImportWritesOneFeedRowPerPurchaseCarryingTheAppUserIdAndAReplacementOneMore() async throws {
        try await TestDatabase.with { db in
            try await MockAppStore.withRunning(.init(scenario: .init(seed: 390, customers: 6))) { mock, baseURL in
                let setup = try AppUserIdTests.setup(mock, baseURL: baseURL)
                let (alice, bob) = (setup.accounts[0], setup.accounts[1])
                let imported = try await ImportTests.importing(
                    "transactionId,appUserId\n\(setup.firstOriginal[alice]!),alice\n\(setup.firstOriginal[bob]!),bob\n", into: db,
                    target: setup.target)
                #expect(imported.ending == nil, "\(imported.failures)")
                let purchases = setup.purchases[alice]!.union(setup.purchases[bob]!)
                #expect(imported.report.created == purchases.count)
                #expect(imported.report.changed == 0, "a first import counted its own appUserIds as changes")

                try await Self.settle(db)
                let first = try await Self.feed(db)
                let rows = first.changes.filter { $0.kind == .purchase }
                #expect(rows.count == purchases.count, "\(rows.map { "\($0.originalTransactionId!) \($0.appUserId ?? "null")" })")
                #expect(Set(rows.compactMap(\.originalTransactionId)) == purchases)
                for row in rows {
                    let user = setup.purchases[alice]!.contains(row.originalTransactionId!) ? "alice" : "bob"
                    #expect(row.before == nil, "\(row.originalTransactionId!)")
                    #expect(row.appUserId == user)
                    #expect(row.after?.appUserId == user)
                }

                // A second import gives bob's customer another ID: one row per purchase of theirs.
                let second = try await ImportTests.importing(
                    "transactionId,appUserId\n\(setup.firstOriginal[bob]!),robert\n", into: db, target: setup.target)
                #expect(second.ending == nil)
                try await Self.settle(db)
                let replaced = try await Self.feed(db, after: first.end).changes
                #expect(replaced.count == setup.purchases[bob]!.count)
                #expect(Set(replaced.compactMap(\.originalTransactionId)) == setup.purchases[bob]!)
                #expect(replaced.allSatisfy { $0.before?.appUserId == "bob" && $0.after?.appUserId == "robert" && $0.appUserId == "robert" })

                // `export --history --app-user-id`: every kept state of the purchases the user has now.
                func history(_ appUserId: String) async throws -> [String: [String?]] {
                    var states: [String: [String?]] = [:]
                    try await PurchaseStore(logger: db.database.logger).exportHistory(apps: nil, appUserId: appUserId, in: db.database) { row in
                        let field = { (key: String) in row.fields.first { $0.key == key }?.value }
                        guard case .string(let original) = field("originalTransactionId") else { return }
                        let user: String? = if case .string(let user) = field("appUserId") { user } else { nil }
                        states[original, default: []].append(user)
                    }
                    return states
                }
                let robert = try await history("robert")
                #expect(Set(robert.keys) == setup.purchases[bob]!)
                #expect(robert.values.allSatisfy { $0 == ["bob", "robert"] }, "\(robert)")
                #expect(Set(try await history("alice").keys) == setup.purchases[alice]!)
                #expect(try await history("bob").isEmpty)
            }
        }
    }

    /// `import --refresh` naming a customer by a new appUserId while the re-read also changes their
    /// purchases: one feed row per purchase, carrying both the state Apple returns and the new ID,
    /// not one for the state and a second for the ID.
    @Test func aRefreshThatChangesAPurchaseAndItsAppUserIdWritesOneRowForBoth() async throws {
        try await TestDatabase.with { db in
            try await MockAppStore.withRunning(.init(scenario: .init(seed: 393, customers: 4))) { mock, baseURL in
                let setup = try AppUserIdTests.setup(mock, baseURL: baseURL)
                let bob = setup.accounts[1]
                let file = { (user: String) in "transactionId,appUserId\n\(setup.firstOriginal[bob]!),\(user)\n" }
                #expect(try await ImportTests.importing(file("bob"), into: db, target: setup.target).ending == nil)
                try await Self.settle(db)
                let first = try await Self.feed(db)

                // Every purchase of bob's loses its state (as a bad restore would), and the history
                // is read again from its start.
                try await db.execute(
                    "UPDATE purchases SET expires_date_ms = NULL, product_id = 'lost' WHERE original_transaction_id = ANY(\(Array(setup.purchases[bob]!)))"
                )
                try await db.execute("DELETE FROM history_revisions")
                let refreshed = try await ImportTests.importing(file("robert"), into: db, target: setup.target, refresh: true)
                #expect(refreshed.ending == nil, "\(refreshed.failures)")
                try await Self.settle(db)
                let rows = try await Self.feed(db, after: first.end).changes.filter { $0.kind == .purchase }
                #expect(
                    rows.count == setup.purchases[bob]!.count,
                    "\(rows.map { "\($0.originalTransactionId!) \($0.after?.productId ?? "?") \($0.appUserId ?? "null")" })")
                #expect(Set(rows.compactMap(\.originalTransactionId)) == setup.purchases[bob]!)
                for row in rows {
                    #expect(row.before?.appUserId == "bob" && row.after?.appUserId == "robert" && row.appUserId == "robert")
                    #expect(row.before?.productId == "lost" && row.after?.productId != "lost", "\(row.originalTransactionId!)")
                }
            }
        }
    }

    /// A notification signed by the mock's key for this app, about `original`, without an
    /// `appTransactionId` (StoreKit 1 apps, older purchases).
    static func notification(
        _ type: NotificationTypeV2, original: String, transactionId: String, signedDate: Int64, setup: Setup, mock: MockAppStore
    ) throws -> String {
        let configuration = setup.verifier.configuration
        let transaction = JWSTransactionDecodedPayload(
            originalTransactionId: original, transactionId: transactionId, bundleId: configuration.bundleId,
            productId: "com.example.premium.monthly", purchaseDate: signedDate, originalPurchaseDate: signedDate,
            expiresDate: signedDate + 30 * 86_400_000, quantity: 1, type: .autoRenewableSubscription, inAppOwnershipType: .purchased,
            signedDate: signedDate, environment: configuration.environment, transactionReason: .purchase)
        return try TestApp().notification(
            type, signedDate: signedDate, transaction: transaction, bundleId: configuration.bundleId, appAppleId: configuration.appAppleId,
            environment: configuration.environment, signer: mock.authority.signer,
            consumptionRequestReason: type == .consumptionRequest ? .fulfillmentIssue : nil)
    }

    /// Notifications about a customer the import named, live or replayed, with no
    /// `appTransactionId` in them: the purchase they write carries the customer's appUserId when
    /// its customer is known by its history (the same purchase, or a purchase linked to the
    /// customer's transaction history), and so does every feed row they write, a notification's own
    /// row (a consumption request's) included.
    @Test func notificationsOfAKnownCustomerCarryTheirAppUserIdWithoutAnAppTransactionId() async throws {
        try await TestDatabase.with { db in
            try await MockAppStore.withRunning(.init(scenario: .init(seed: 391, customers: 4))) { mock, baseURL in
                let (setup, alice, imported) = try await AppUserIdTests.importingAlice(mock, baseURL: baseURL, into: db)
                let anchor = setup.firstOriginal[alice]!
                try await Self.settle(db)
                let start = try await Self.feed(db).end
                let handler = NotificationHandler(verifier: setup.verifier, database: db.database)
                let store = PurchaseStore(database: db.database, scope: setup.target.scope)
                func stored(_ original: String) async throws -> PurchaseState? {
                    try await db.database.transaction { try await store.purchaseStates([original], on: $0)[original] }
                }
                var now = Int64(Date().timeIntervalSince1970 * 1000)

                // A consumption request about one of alice's purchases, live: its own row says alice.
                let known = setup.purchases[alice]!.sorted()[0]
                _ = try await handler.handle(
                    signedPayload: try Self.notification(
                        .consumptionRequest, original: known, transactionId: known, signedDate: now, setup: setup, mock: mock), source: .webhook)

                // A new purchase no stored purchase links to alice yet: no appUserId (nothing says whose it is).
                let later = "9200000000000001"
                now += 1000
                _ = try await handler.handle(
                    signedPayload: try Self.notification(
                        .subscribed, original: later, transactionId: later, signedDate: now, setup: setup, mock: mock),
                    source: .webhook)
                #expect(try await stored(later)?.appUserId == nil)
                // A run's transaction history then shows it among alice's purchases (what phase 2 records).
                try await db.database.transaction { transaction in
                    try await store.customers.recordHistoryChecked(
                        anchor: anchor, revision: nil, purchases: [later], checkedAt: .now, on: transaction)
                }
                // Its renewal, live, then replayed by a run: the same history names alice.
                now += 1000
                _ = try await handler.handle(
                    signedPayload: try Self.notification(
                        .didRenew, original: later, transactionId: "9200000000000002", signedDate: now, setup: setup, mock: mock), source: .webhook)
                #expect(try await stored(later)?.appUserId == "alice")
                now += 1000
                _ = try await handler.handle(
                    signedPayload: try Self.notification(
                        .didRenew, original: later, transactionId: "9200000000000003", signedDate: now, setup: setup, mock: mock),
                    source: .history(runId: imported.runIds[0]))
                #expect(try await stored(later)?.appUserId == "alice")

                try await Self.settle(db)
                let rows = try await Self.feed(db, after: start).changes
                let request = rows.filter { $0.kind == .notification && $0.notificationType == "CONSUMPTION_REQUEST" }
                #expect(request.count == 1)
                #expect(request.allSatisfy { $0.appUserId == "alice" }, "\(request.map { $0.appUserId ?? "null" })")
                let renewals = rows.filter { $0.originalTransactionId == later && $0.notificationType == "DID_RENEW" }
                #expect(renewals.count == 2, "\(rows.map { "\($0.kind) \($0.notificationType ?? "") \($0.originalTransactionId ?? "")" })")
                #expect(renewals.allSatisfy { $0.appUserId == "alice" && ($0.after == nil || $0.after?.appUserId == "alice") })
                #expect(renewals.contains { $0.source == .history && $0.runId == imported.runIds[0] })
                // Every row about alice's purchases, of either kind, says so, but the one of the
                // purchase no stored purchase linked to her yet.
                let subscribed = rows.filter { $0.originalTransactionId == later && $0.notificationType == "SUBSCRIBED" }
                #expect(subscribed.count == 1)
                #expect(subscribed.allSatisfy { $0.appUserId == nil })
                let alices = setup.purchases[alice]!.union([later])
                #expect(
                    rows.filter { ($0.originalTransactionId.map(alices.contains) ?? false) && $0.notificationType != "SUBSCRIBED" }
                        .allSatisfy { $0.appUserId == "alice" })
            }
        }
    }

    /// A run's phase 2 reads a customer's history from a purchase it has just met (replayed
    /// without an `appTransactionId`): the page also holds the customer's purchases an import
    /// named, linked to the import's anchor. The new purchase is written with their appUserId
    /// (the same history), not left without one until its next notification.
    @Test func aRunReadingAKnownCustomerFromANewPurchaseGivesItTheirAppUserId() async throws {
        try await TestDatabase.with { db in
            try await MockAppStore.withRunning(.init(scenario: .init(seed: 392, customers: 4))) { mock, baseURL in
                let (setup, alice, imported) = try await AppUserIdTests.importingAlice(mock, baseURL: baseURL, into: db)
                let handler = NotificationHandler(verifier: setup.verifier, database: db.database)
                let store = PurchaseStore(database: db.database, scope: setup.target.scope)
                let later = "9300000000000001"
                _ = try await handler.handle(
                    signedPayload: try Self.notification(
                        .subscribed, original: later, transactionId: later, signedDate: Int64(Date().timeIntervalSince1970 * 1000), setup: setup,
                        mock: mock), source: .history(runId: imported.runIds[0]))
                // Phase 2's commit of the customer read from the new purchase: one page, one history.
                let page = setup.purchases[alice]!.union([later]).sorted()
                let changes = try await db.database.transaction { transaction in
                    try await store.lock(purchases: page, anchors: [later], on: transaction)
                    let before = try await store.purchaseStates(page, on: transaction)
                    return try await store.write(
                        transactions: [],
                        updates: page.map {
                            var update = PurchaseStore.PurchaseUpdate(originalTransactionId: $0)
                            update.historyAnchor = later
                            return update
                        }, before: before, origin: .init(source: .transactionHistory, runId: imported.runIds[0]), on: transaction)
                }
                #expect(changes[later]?.after.appUserId == "alice")
                #expect(page.allSatisfy { changes[$0]?.after.appUserId == "alice" })
            }
        }
    }
}
