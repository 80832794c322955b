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

/// The app's own ID for a customer (`appUserId`), given by `reconciler import` against the mock
/// over HTTP into a real PostgreSQL: it goes on every purchase of the customer, on their feed
/// rows and on their later purchases; a later import replaces it with a feed row.
@Suite struct AppUserIdTests {
    struct Setup {
        let target: CustomerImport.Target
        let verifier: SignedDataVerifier
        /// The mock's accounts, in order, and each one's purchases (originalTransactionIds) and transactions.
        let accounts: [String]
        let purchases: [String: Set<String>]
        let transactions: [String: Set<String>]
        let firstOriginal: [String: String]
    }

    static func setup(_ mock: MockAppStore, baseURL: String) throws -> Setup {
        let verifier = try mock.verifier()
        let target = CustomerImport.Target(
            scope: AppScope(target: verifier.configuration.target, entitlement: .init(nonRenewingTerms: mock.nonRenewingTerms)),
            verifier: verifier, client: mock.client(baseURL: baseURL))
        let byAccount = Dictionary(grouping: mock.orders, by: \.account)
        let accounts = byAccount.keys.sorted()
        return Setup(
            target: target, verifier: verifier, accounts: accounts, purchases: byAccount.mapValues { Set($0.map(\.originalTransactionId)) },
            transactions: byAccount.mapValues { Set($0.map(\.transactionId)) },
            firstOriginal: byAccount.mapValues { $0.map(\.originalTransactionId).min()! })
    }

    /// Imports the mock's first customer as `alice` (by their first purchase) into an empty
    /// database: the setup, the customer's account and the import's result.
    static func importingAlice(
        _ mock: MockAppStore, baseURL: String, into db: TestDatabase
    ) async throws -> (setup: Setup, alice: String, imported: CustomerImport.Result) {
        let setup = try Self.setup(mock, baseURL: baseURL)
        let alice = setup.accounts[0]
        let imported = try await ImportTests.importing(
            "transactionId,appUserId\n\(setup.firstOriginal[alice]!),alice\n", into: db, target: setup.target)
        #expect(imported.ending == nil, "\(imported.failures)")
        return (setup, alice, imported)
    }

    static func export(_ db: TestDatabase, _ setup: Setup, appUserId: String? = nil) async throws -> [PurchaseState] {
        var states: [PurchaseState] = []
        try await PurchaseStore(database: db.database, scope: setup.target.scope).exportPurchases(
            apps: nil, appUserId: appUserId, in: db.database
        ) { states.append($0) }
        return states
    }

    /// The feed's readable rows after `position`, of `kind` (`nil`: both kinds).
    static func feed(
        _ db: TestDatabase, after position: PurchaseStore.FeedPosition = .start, appUserId: String? = nil,
        kind: PurchaseStore.FeedKind? = .purchase
    ) async throws -> PurchaseStore.FeedBatch {
        let store = PurchaseStore(logger: db.database.logger)
        return try await db.database.transaction {
            try await store.changes(after: position, limit: 10_000, kind: kind, appUserId: appUserId, on: $0)
        }
    }

    /// Waits until every row of the feed of `kind` (`nil`: both kinds) is readable (a row is, once
    /// no transaction older than it runs: another test's may, in the same cluster).
    static func settle(_ db: TestDatabase, kind: PurchaseStore.FeedKind? = .purchase) async throws {
        try await eventually("the feed readable") {
            try await Self.feed(db, kind: kind).changes.count
                == (try await db.count("SELECT count(*) FROM purchase_changes WHERE kind = coalesce(\(kind?.rawValue)::text, kind)"))
        }
    }

    @Test func anImportsAppUserIdIsInExportAndTheFeedAndALaterImportReplacesItWithAFeedRow() async throws {
        try await TestDatabase.with { db in
            try await MockAppStore.withRunning(.init(scenario: .init(seed: 380, customers: 8))) { mock, baseURL in
                let setup = try Self.setup(mock, baseURL: baseURL)
                #expect(setup.accounts.count >= 3)
                let (alice, bob, nobody) = (setup.accounts[0], setup.accounts[1], setup.accounts[2])
                let file = """
                    transactionId,appUserId
                    \(setup.firstOriginal[alice]!),alice
                    \(setup.firstOriginal[bob]!),"bob, the second"
                    \(setup.firstOriginal[nobody]!),

                    """
                let first = try await ImportTests.importing(file, into: db, target: setup.target)
                #expect(first.ending == nil, "\(first.failures)")
                #expect(first.report.customers == 3)

                // Every purchase of each customer carries their ID; a customer named without one has none.
                let exported = try await Self.export(db, setup)
                let expected = [alice: "alice", bob: "bob, the second"]
                for state in exported {
                    let account = setup.accounts.first { setup.purchases[$0]!.contains(state.originalTransactionId) }!
                    #expect(state.appUserId == expected[account], "\(state.originalTransactionId) of \(account)")
                }
                #expect(
                    Set(exported.map(\.originalTransactionId)) == setup.purchases[alice]!.union(setup.purchases[bob]!).union(setup.purchases[nobody]!)
                )
                #expect(Set(try await Self.export(db, setup, appUserId: "alice").map(\.originalTransactionId)) == setup.purchases[alice]!)
                #expect(try await Self.export(db, setup, appUserId: "carol").isEmpty)
                // export --transactions carries the purchase's appUserId, and selects by it.
                var transactionRows: [ExportRow] = []
                try await PurchaseStore(logger: db.database.logger).exportTransactions(apps: nil, appUserId: "alice", in: db.database) {
                    transactionRows.append($0)
                }
                #expect(
                    Set(transactionRows.compactMap { row in row.fields.first { $0.key == "transactionId" }.map(\.value) })
                        == Set(setup.transactions[alice]!.map(ExportRow.Value.string)))
                #expect(transactionRows.allSatisfy { row in row.fields.contains { $0.key == "appUserId" && $0.value == .string("alice") } })

                // The feed: the last row of each of alice's purchases says alice, on the line and in its state.
                try await Self.settle(db)
                let feed = try await Self.feed(db, appUserId: "alice")
                #expect(Set(feed.changes.compactMap(\.originalTransactionId)) == setup.purchases[alice]!)
                var last: [String: PurchaseStore.FeedChange] = [:]
                for change in feed.changes { last[change.originalTransactionId!] = change }
                #expect(last.values.allSatisfy { $0.appUserId == "alice" && $0.after?.appUserId == "alice" })
                #expect(try await Self.feed(db).changes.allSatisfy { $0.appUserId == $0.after?.appUserId })
                let position = try await Self.feed(db).end

                // A later import names alice's customer carol: no request, and one feed row per purchase.
                let asked = ImportTests.total(mock)
                let second = try await ImportTests.importing(
                    "transactionId,appUserId\n\(setup.firstOriginal[alice]!),carol\n", into: db, target: setup.target)
                #expect(second.ending == nil)
                #expect(ImportTests.total(mock) == asked, "a later import of a completed customer asked Apple")
                #expect(second.alreadyComplete == 1)
                #expect(second.report.changed == setup.purchases[alice]!.count)
                #expect(try await Self.export(db, setup, appUserId: "alice").isEmpty)
                #expect(Set(try await Self.export(db, setup, appUserId: "carol").map(\.originalTransactionId)) == setup.purchases[alice]!)
                try await Self.settle(db)
                let replaced = try await Self.feed(db, after: position)
                #expect(replaced.changes.count == setup.purchases[alice]!.count)
                for change in replaced.changes {
                    #expect(change.before?.appUserId == "alice")
                    #expect(change.after?.appUserId == "carol")
                    #expect(change.appUserId == "carol")
                    #expect(change.source == .transactionHistory)
                    #expect(change.runId == second.runIds.first)
                    #expect(change.after?.changedFields(from: change.before) == ["appUserId"])
                }
                // The user the purchases left still sees the change that took them away.
                #expect(try await Self.feed(db, after: position, appUserId: "alice").changes.count == setup.purchases[alice]!.count)

                // The same import again changes nothing.
                _ = try await ImportTests.importing("transactionId,appUserId\n\(setup.firstOriginal[alice]!),carol\n", into: db, target: setup.target)
                try await Self.settle(db)
                #expect(try await Self.feed(db, after: replaced.end).changes.isEmpty)
            }
        }
    }

    /// The mock's customers whose last activity is older than the notification history's retention
    /// (an annual subscription still running, a lifetime unlock, an expired subscription) are in
    /// no window Apple serves; its identifiers list names them with the app's own IDs, and once it
    /// is imported, export equals the truth, which then carries those appUserIds.
    @Test func theCustomersOlderThanTheHistoryAreFoundByImportingTheMocksList() async throws {
        try await TestDatabase.with { db in
            var scenario = ScenarioConfiguration(seed: 382, customers: 3)
            scenario.dormantCustomers = 6
            try await MockAppStore.withRunning(.init(scenario: scenario)) { mock, baseURL in
                let setup = try Self.setup(mock, baseURL: baseURL)
                let list = mock.identifiersCSV()
                let rows = list.split(separator: "\n").dropFirst().map { $0.split(separator: ",").map(String.init) }
                #expect(rows.count == 6, "\(list)")
                #expect(rows.allSatisfy { $0.count == 2 && $0[1].hasPrefix("user-production-account-dormant-") })
                let now = Timestamp.now
                let truth = try mock.truthJSONLines(at: now.millisecondsSince1970).split(separator: "\n").map {
                    try JSONDecoder().decode(PurchaseState.self, from: Data($0.utf8))
                }.filter { $0.appUserId != nil }
                #expect(truth.count == 6)
                // What a new deployment could never see otherwise: no notification of theirs at all.
                #expect(truth.allSatisfy { $0.lastSignedDate == nil && ($0.purchaseDate ?? .max) < now.millisecondsSince1970 - 180 * 86_400_000 })
                #expect(truth.contains { $0.productId == "com.example.premium.yearly" && $0.entitled == true && $0.status == 1 })
                #expect(truth.contains { $0.productId == "com.example.lifetime" && $0.entitled == true })
                #expect(truth.contains { $0.productId == "com.example.premium.monthly" && $0.entitled == false && $0.status == 2 })

                let imported = try await ImportTests.importing(list, into: db, target: setup.target)
                #expect(imported.ending == nil, "\(imported.failures)")
                #expect(imported.report.customers == 6)
                var exported: [String] = []
                try await PurchaseStore(database: db.database, scope: setup.target.scope).exportPurchases(
                    apps: nil, entitlements: [setup.target.scope.target: setup.target.scope.entitlement], at: now, in: db.database
                ) { exported.append(try $0.jsonLine()) }
                let expected = try truth.map { try $0.jsonLine() }
                #expect(
                    exported.sorted() == expected.sorted(),
                    "\(Rehearsal.difference(exported.sorted().joined(separator: "\n"), expected.sorted().joined(separator: "\n")))")
            }
        }
    }

    /// A purchase the customer makes later (the same appTransactionId, delivered live) carries
    /// the appUserId; a stranger's does not.
    @Test func aLaterPurchaseOfTheSameCustomerCarriesTheirAppUserId() async throws {
        try await TestDatabase.with { db in
            try await MockAppStore.withRunning(.init(scenario: .init(seed: 381, customers: 4))) { mock, baseURL in
                let (setup, alice, _) = try await Self.importingAlice(mock, baseURL: baseURL, into: db)
                let appTransactionId = try #require(try await Self.export(db, setup).first?.appTransactionId)

                let handler = NotificationHandler(verifier: setup.verifier, database: db.database)
                let app = try TestApp()
                let now = Int64(Date().timeIntervalSince1970 * 1000)
                let configuration = setup.verifier.configuration
                func purchase(_ id: String, appTransactionId: String) throws -> String {
                    let transaction = JWSTransactionDecodedPayload(
                        originalTransactionId: id, transactionId: id, bundleId: configuration.bundleId, productId: "com.example.coins",
                        purchaseDate: now, originalPurchaseDate: now, quantity: 1, type: .consumable, inAppOwnershipType: .purchased,
                        signedDate: now, environment: configuration.environment, transactionReason: .purchase, appTransactionId: appTransactionId)
                    return try app.notification(
                        .oneTimeCharge, signedDate: now, transaction: transaction, bundleId: configuration.bundleId,
                        appAppleId: configuration.appAppleId, environment: configuration.environment, signer: mock.authority.signer)
                }
                #expect(
                    try await handler.handle(signedPayload: try purchase("9100000000000001", appTransactionId: appTransactionId), source: .webhook)
                        .outcome == .applied)
                #expect(
                    try await handler.handle(
                        signedPayload: try purchase("9100000000000002", appTransactionId: "709999999999999999"), source: .webhook
                    ).outcome == .applied)

                let states = Dictionary(uniqueKeysWithValues: try await Self.export(db, setup).map { ($0.originalTransactionId, $0) })
                #expect(states["9100000000000001"]?.appUserId == "alice")
                #expect(states["9100000000000002"] != nil)
                #expect(states["9100000000000002"]?.appUserId == nil)
                try await Self.settle(db)
                let feed = try await Self.feed(db, appUserId: "alice")
                #expect(
                    feed.changes.contains { $0.originalTransactionId == "9100000000000001" && $0.before == nil && $0.after?.appUserId == "alice" })
                // The one lookup by app user (repair and the app API read it).
                let lookedUp = try await db.database.transaction { transaction in
                    try await PurchaseStore(database: db.database, scope: setup.target.scope).purchaseStates(ofAppUserId: "alice", on: transaction)
                }
                #expect(Set(lookedUp.map(\.originalTransactionId)) == setup.purchases[alice]!.union(["9100000000000001"]))
            }
        }
    }
}
