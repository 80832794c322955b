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

/// The change feed's `time` rows: a purchase whose `entitled` flips because a moment passed gets a
/// row of source `time` (only `entitled` differs), once, whoever writes it (serve's leader, a run).
/// Every test moves an injected "now" past the moment; none waits on the wall clock.
@Suite struct TimeRowsTests {
    let app: TestApp
    init() throws { app = try TestApp() }

    static let day: Int64 = 86_400_000
    static let minute: Int64 = 60_000

    /// The feed's `time` rows, oldest first: (purchase, entitled before, entitled after, other fields equal).
    static func timeRows(_ db: TestDatabase) async throws -> [(String, Bool?, Bool?, Bool)] {
        let rows = try await db.client.query(
            """
            SELECT original_transaction_id, before_state::text, after_state::text FROM purchase_changes
            WHERE source = 'time' ORDER BY change_id
            """, logger: TestDatabase.logger)
        var result: [(String, Bool?, Bool?, Bool)] = []
        for try await (id, before, after) in rows.decode((String, String, String).self) {
            let decoder = JSONDecoder()
            var old = try decoder.decode(PurchaseState.self, from: Data(before.utf8))
            let new = try decoder.decode(PurchaseState.self, from: Data(after.utf8))
            let entitled = (old.entitled, new.entitled)
            old.entitled = new.entitled
            result.append((id, entitled.0, entitled.1, old == new))
        }
        return result
    }

    func leader(_ db: TestDatabase, holder: String, now: Timestamp, entitlement: EntitlementPolicy = .init()) -> ServeLeader {
        ServeLeader(
            configuration: .init(holder: holder, now: { now }),
            writer: TimeRowWriter(scopes: [app.scope(entitlement)], database: db.database), logger: TestDatabase.logger)
    }

    func subscribe(_ original: String, handler: NotificationHandler, grace: Int64? = nil) async throws -> Int64 {
        let transaction = app.subscription(original: original, period: 0, signedDate: app.start)
        let renewal = app.renewal(original: original, autoRenew: .on, signedDate: app.start, gracePeriodExpiresDate: grace)
        _ = try await handler.handle(
            signedPayload: try app.notification(
                .subscribed, .initialBuy, signedDate: app.start, transaction: transaction, renewal: renewal),
            source: .webhook)
        return transaction.expiresDate!
    }

    /// A subscription that runs out gets its `time` row once, with two leaders racing at the same
    /// moment and ticking again; before the moment, none.
    @Test func aSubscriptionEndingGetsItsTimeRowOnceWithTwoLeadersRacing() async throws {
        try await TestDatabase.with { db in
            let expires = try await subscribe("time-1", handler: try app.handler(db))
            let before = Timestamp(millisecondsSince1970: expires - Self.minute)
            #expect(try await leader(db, holder: "a", now: before).tick().written.isEmpty)
            #expect(try await Self.timeRows(db).isEmpty)

            let after = Timestamp(millisecondsSince1970: expires + Self.minute)
            let (a, b) = (leader(db, holder: "a", now: after), leader(db, holder: "b", now: after))
            async let first = a.tick()
            async let second = b.tick()
            let ticks = try await [first, second]
            // One lease: exactly one of them leads, and it wrote the row.
            #expect(ticks.filter { $0.leads }.count == 1)
            #expect(ticks.flatMap { $0.written }.count == 1)
            // The next ticks find nothing due; two writers without the lease (a run and the leader) neither.
            _ = try await a.tick()
            _ = try await b.tick()
            async let run1 = a.writer.writeDue(at: after)
            async let run2 = b.writer.writeDue(at: Timestamp(millisecondsSince1970: expires + 2 * Self.minute))
            #expect(try await (run1 + run2).isEmpty)
            let rows = try await Self.timeRows(db)
            #expect(rows.count == 1)
            #expect(rows.first?.0 == "time-1" && rows.first?.1 == true && rows.first?.2 == false && rows.first?.3 == true)
            #expect(try await db.count("SELECT count(*) FROM entitlement_instants WHERE instant_ms = \(expires)") == 1)
        }
    }

    /// Two `serve` replicas (two leader services running on one database, as two processes run
    /// them) on one injected clock that also moves "now": a subscription ending gets its `time` row
    /// exactly once, at the first tick past its moment; when the leading replica dies, the other
    /// takes the lease once it runs out and writes the next ending, once.
    @Test func twoServeReplicasWriteEachEndingOnceAndTakeOverWhenTheLeaderDies() async throws {
        try await TestDatabase.with { db in
            let expires = try await subscribe("replica-1", handler: try app.handler(db))
            // A second subscription of the app ending ten minutes later, as any writer left it.
            let target = app.scope().target
            try await db.execute(
                """
                INSERT INTO purchases (bundle_id, environment, original_transaction_id, product_type, product_id, purchase_date_ms, expires_date_ms)
                VALUES (\(target.bundleId), \(target.environment.rawValue), 'replica-2', 'Auto-Renewable Subscription', 'com.example.monthly',
                        \(expires - 30 * Self.day), \(expires + 10 * Self.minute))
                """)
            // The replicas' ticks and "now" both move with the clock: now starts 150 s before the moment.
            let clock = ManualClock()
            let start = expires - 150_000
            let now: @Sendable () -> Timestamp = { Timestamp(millisecondsSince1970: start + clock.now.milliseconds) }
            let replicas = ["a", "b"].map { holder in
                ServeLeader(
                    configuration: .init(interval: .seconds(60), holder: holder, clock: clock, now: now),
                    writer: TimeRowWriter(scopes: [app.scope()], database: db.database), logger: TestDatabase.logger)
            }
            let running = replicas.map { replica in Task { try await replica.run() } }
            defer { for task in running { task.cancel() } }
            func leader() async throws -> [String] { try await db.strings("SELECT holder FROM serve_leases") }
            /// One interval on: every live replica ticked once more and sleeps again.
            func nextTick(replicas live: Int) async {
                clock.advance(by: .seconds(60))
                await clock.waitForSleepers(live)
            }

            await clock.waitForSleepers(2)
            #expect(try await Self.timeRows(db).isEmpty, "a row before the moment")
            await nextTick(replicas: 2)  // 90 s before
            #expect(try await Self.timeRows(db).isEmpty, "a row before the moment")
            await nextTick(replicas: 2)  // 30 s before
            #expect(try await Self.timeRows(db).isEmpty, "a row before the moment")
            await nextTick(replicas: 2)  // 30 s after: within one interval of the moment
            #expect(try await Self.timeRows(db).map(\.0) == ["replica-1"])
            for _ in 0..<3 { await nextTick(replicas: 2) }
            let rows = try await Self.timeRows(db)
            #expect(rows.map(\.0) == ["replica-1"], "\(rows.map(\.0))")
            #expect(rows.first?.1 == true && rows.first?.2 == false && rows.first?.3 == true, "only entitled differs")
            #expect(try await db.count("SELECT count(*) FROM purchase_changes WHERE source = 'time' AND run_id IS NULL") == 1)

            // The leading replica stops (cancelled: it may give its lease up as it goes, or not, as
            // when killed: then the lease runs out, moved back here as the database's own clock would
            // see it two intervals later); the other replica leads from its next tick.
            let first = try #require(try await leader().first)
            let (dead, survivor) = first == "a" ? (0, "b") : (1, "a")
            running[dead].cancel()
            _ = try? await running[dead].value
            try await db.execute("UPDATE serve_leases SET lease_until = now() - interval '1 second' WHERE holder = \(first)")
            for _ in 0..<8 { await nextTick(replicas: 1) }  // past replica-2's moment
            #expect(try await leader() == [survivor])
            #expect(try await Self.timeRows(db).map(\.0) == ["replica-1", "replica-2"])
            for task in running {
                task.cancel()
                _ = try? await task.value
            }
        }
    }

    /// Two writers with no lease between them (two runs, or a run beside the leader) race on the same
    /// moments: the unique key (purchase, moment) lets each row in once.
    @Test func twoWritersRacingWriteEachRowOnce() async throws {
        try await TestDatabase.with { db in
            let handler = try app.handler(db)
            var latest: Int64 = 0
            for index in 0..<20 { latest = max(latest, try await subscribe("race-\(index)", handler: handler)) }
            let now = Timestamp(millisecondsSince1970: latest + Self.minute)
            let writers = (0..<4).map { _ in TimeRowWriter(scopes: [app.scope()], database: db.database) }
            let written = try await withThrowingTaskGroup(of: Int.self) { group in
                for writer in writers { group.addTask { try await writer.writeDue(at: now).count } }
                return try await group.reduce(0, +)
            }
            #expect(written == 20)
            #expect(try await db.count("SELECT count(*) FROM purchase_changes WHERE source = 'time'") == 20)
        }
    }

    /// The recorded moments are forgotten once no writer can find them due again (a day past the
    /// lookback, by the database's clock): the table does not grow with every ending ever.
    @Test func recordedMomentsAreForgottenOnceNeverDueAgain() async throws {
        try await TestDatabase.with { db in
            let handler = try app.handler(db)
            let (old, fresh) = (try await subscribe("forget-old", handler: handler), try await subscribe("forget-new", handler: handler))
            let writer = TimeRowWriter(scopes: [app.scope()], database: db.database)
            #expect(try await writer.writeDue(at: Timestamp(millisecondsSince1970: max(old, fresh) + Self.minute)).count == 2)
            try await db.execute(
                "UPDATE entitlement_instants SET recorded_at = now() - interval '2 days 1 minute' WHERE original_transaction_id = 'forget-old'")
            #expect(try await writer.writeDue(at: Timestamp(millisecondsSince1970: max(old, fresh) + 2 * Self.minute)).isEmpty)
            #expect(try await db.strings("SELECT original_transaction_id FROM entitlement_instants") == ["forget-new"])
            // Its feed row stays: only the key that kept it single goes.
            #expect(try await Self.timeRows(db).count == 2)
        }
    }

    /// A grace period keeps the customer entitled past `expiresDate`: the row comes at its end.
    @Test func aGracePeriodEndingGetsItsTimeRowAtItsEnd() async throws {
        try await TestDatabase.with { db in
            let expiresGuess = app.start + 30 * Self.day
            let grace = expiresGuess + 16 * Self.day
            let expires = try await subscribe("grace-1", handler: try app.handler(db), grace: grace)
            #expect(expires == expiresGuess)
            let writer = TimeRowWriter(scopes: [app.scope()], database: db.database)
            #expect(try await writer.writeDue(at: Timestamp(millisecondsSince1970: expires + Self.minute)).isEmpty)
            let written = try await writer.writeDue(at: Timestamp(millisecondsSince1970: grace + Self.minute))
            #expect(written.map(\.after.originalTransactionId) == ["grace-1"])
            let rows = try await Self.timeRows(db)
            #expect(rows.count == 1 && rows.first?.1 == true && rows.first?.2 == false && rows.first?.3 == true)
        }
    }

    /// A non-renewing subscription's term is the app's: its row comes at purchase + term.
    @Test func aNonRenewingTermPassingGetsItsTimeRow() async throws {
        try await TestDatabase.with { db in
            let term = 30 * Self.day
            let policy = EntitlementPolicy(nonRenewingTerms: ["com.example.pass.30d": term])
            let handler = try app.handler(db, entitlement: policy)
            let purchased = app.start
            let pass = app.oneTime(
                "pass-1", type: .nonRenewingSubscription, product: "com.example.pass.30d", purchaseDate: purchased, signedDate: purchased)
            _ = try await handler.handle(
                signedPayload: try app.notification(.oneTimeCharge, signedDate: purchased, transaction: pass), source: .webhook)
            let writer = TimeRowWriter(scopes: [app.scope(policy)], database: db.database)
            #expect(try await writer.writeDue(at: Timestamp(millisecondsSince1970: purchased + term - Self.minute)).isEmpty)
            let written = try await writer.writeDue(at: Timestamp(millisecondsSince1970: purchased + term + Self.minute))
            #expect(written.map(\.after.originalTransactionId) == ["pass-1"])
            #expect(written.first?.before?.entitled == true && written.first?.after.entitled == false)
            // Without a term the rule cannot say: no moment, no row.
            let unknown = TimeRowWriter(scopes: [app.scope()], database: db.database)
            #expect(try await unknown.writeDue(at: Timestamp(millisecondsSince1970: purchased + 2 * term)).isEmpty)
        }
    }

    /// A subscription renewed before its moment gets no row at the old moment (its moment moved).
    @Test func aPurchaseRenewedBeforeItsMomentGetsNone() async throws {
        try await TestDatabase.with { db in
            let handler = try app.handler(db)
            let expires = try await subscribe("renewed-1", handler: handler)
            let renewal = app.subscription(original: "renewed-1", period: 1, signedDate: expires - Self.day)
            _ = try await handler.handle(
                signedPayload: try app.notification(
                    .didRenew, signedDate: expires - Self.day, transaction: renewal,
                    renewal: app.renewal(original: "renewed-1", autoRenew: .on, signedDate: expires - Self.day)),
                source: .webhook)
            let writer = TimeRowWriter(scopes: [app.scope()], database: db.database)
            #expect(try await writer.writeDue(at: Timestamp(millisecondsSince1970: expires + Self.minute)).isEmpty)
            #expect(try await Self.timeRows(db).isEmpty)
            // Its new moment gets its row.
            let written = try await writer.writeDue(at: Timestamp(millisecondsSince1970: renewal.expiresDate! + Self.minute))
            #expect(written.map(\.after.expiresDate) == [renewal.expiresDate])
        }
    }

    /// A run writes the rows it finds due, at its own "now".
    @Test func aRunWritesTheTimeRowsItFindsDue() async throws {
        try await TestDatabase.with { db in
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            let hour: Int64 = 3_600_000
            let scenario = ScenarioConfiguration(seed: 36, customers: 2, now: now, span: 6 * hour, outageStart: now - 5 * hour, outageEnd: now - hour)
            try await MockAppStore.withRunning(.init(scenario: scenario)) { mock, baseURL in
                let verifier = try mock.verifier()
                let target = verifier.configuration.target
                // A purchase of the run's app whose subscription ends at `moment`, as any writer left it.
                // Months after the scenario's own subscriptions end, so theirs are not due with it.
                let moment = now + 90 * Self.day
                try await db.execute(
                    """
                    INSERT INTO purchases (bundle_id, environment, original_transaction_id, product_type, product_id, purchase_date_ms, expires_date_ms)
                    VALUES (\(target.bundleId), \(target.environment.rawValue), 'run-time-1', 'Auto-Renewable Subscription', 'com.example.monthly',
                            \(moment - 30 * Self.day), \(moment))
                    """)
                var configuration = ReconcileRun.Configuration(window: TimeWindow(milliseconds: (now - 5 * hour)..<(now - hour)))
                configuration.now = { Timestamp(millisecondsSince1970: moment + Self.minute) }
                let report = try await ReconcileRun(
                    configuration: configuration, scope: AppScope(target: target, entitlement: .init()), database: db.database,
                    verifier: verifier, client: mock.client(baseURL: baseURL)
                ).reconcile(progress: RunProgress())
                let rows = try await Self.timeRows(db)
                let ours = rows.filter { $0.0 == "run-time-1" }
                // Counted apart in the run's report, not among what it recovered, and named by no run
                // in the feed (the run's rows are what it recovered).
                #expect(report.timeRows == rows.count && !rows.isEmpty, "\(String(describing: report.timeRows)) vs \(rows.count)")
                #expect(report.changes.allSatisfy { $0.originalTransactionId != "run-time-1" })
                #expect(
                    try await db.count(
                        "SELECT count(*) FROM purchase_changes WHERE source = 'time' AND original_transaction_id = 'run-time-1' AND run_id IS NULL")
                        == 1)
                #expect(
                    report.humanSummary().contains(
                        "  time         purchases that lost entitlement as time passed (expiry, grace period or term ended): \(rows.count);"),
                    "\(report.humanSummary())")
                #expect(ours.count == 1)
                #expect(ours.first?.1 == true && ours.first?.2 == false && ours.first?.3 == true)
            }
        }
    }
}
