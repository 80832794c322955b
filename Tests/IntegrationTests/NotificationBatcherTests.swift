import AppStoreServer
import Foundation
import PostgresNIO
import ReconcilerDomain
import ReconcilerShared
import TestSupport
import Testing

@testable import Reconciler
@testable import ReconcilerStore

/// The live path's batches: notifications that arrive together share a transaction and leave the
/// state that applying them one by one leaves.
@Suite(.timeLimit(.minutes(5))) struct NotificationBatcherTests {
    let app: TestApp
    init() throws { app = try TestApp() }

    var t0: Int64 { app.start + 86_400_000 }

    /// Eight purchases, three notifications each, each purchase's newest first (so each older one
    /// is applied after a newer one of its purchase) or oldest first.
    func notifications(newestFirst: Bool = true) throws -> [String] {
        let day: Int64 = 86_400_000
        return try (0..<8).flatMap { index -> [String] in
            let original = "\(7000 + index)"
            let bought = try app.notification(
                .subscribed, .initialBuy, signedDate: t0, transaction: app.subscription(original: original, period: 0, signedDate: t0),
                renewal: app.renewal(original: original, autoRenew: .on, signedDate: t0), status: .active)
            let renewed = try app.notification(
                .didRenew, signedDate: t0 + 30 * day, transaction: app.subscription(original: original, period: 1, signedDate: t0 + 30 * day),
                renewal: app.renewal(original: original, autoRenew: .on, signedDate: t0 + 30 * day), status: .active)
            let disabled = try app.notification(
                .didChangeRenewalStatus, .autoRenewDisabled, signedDate: t0 + 40 * day,
                transaction: app.subscription(original: original, period: 1, signedDate: t0 + 40 * day),
                renewal: app.renewal(original: original, autoRenew: .off, signedDate: t0 + 40 * day), status: .active)
            return newestFirst ? [disabled, renewed, bought] : [bought, renewed, disabled]
        }
    }

    /// What a database holds after the notifications: the purchases, and the feed's rows by kind.
    struct Applied: Equatable {
        var states: [String: PurchaseState]
        var feedRows: [String]
    }

    func applied(_ db: TestDatabase, _ handler: NotificationHandler) async throws -> Applied {
        let originals = Set((0..<8).map { "\(7000 + $0)" })
        return Applied(
            states: try await db.database.transaction { try await handler.store.purchaseStates(originals, on: $0) },
            feedRows: try await db.strings("SELECT kind || ' ' || count(*) FROM purchase_changes GROUP BY kind ORDER BY kind"))
    }

    /// Submits every notification in order (each one only once the previous waits: child tasks
    /// start in no set order), then runs the batcher: with one worker it takes them in that order.
    /// Returns each one's result or error, in order.
    func submitThenRun(
        _ payloads: [String], handler: NotificationHandler, batcher: NotificationBatcher
    ) async throws -> [Result<HandlingResult, any Error>] {
        let notifications = try await payloads.asyncMap { try await handler.verify(signedPayload: $0) }
        return try await withThrowingTaskGroup(of: (Int, Result<HandlingResult, any Error>)?.self) { group in
            for (index, notification) in notifications.enumerated() {
                group.addTask {
                    do { return (index, .success(try await batcher.handle(notification, by: handler, forwarding: nil))) } catch {
                        return (index, .failure(error))
                    }
                }
                while batcher.waiting < index + 1 { await Task.yield() }
            }
            group.addTask {
                try await batcher.run()
                return nil
            }
            var results = [Result<HandlingResult, any Error>?](repeating: nil, count: notifications.count)
            for _ in notifications.indices {
                guard let (index, result) = try await group.next() ?? nil else { continue }
                results[index] = result
            }
            group.cancelAll()
            return results.compactMap { $0 }
        }
    }

    /// Notifications that arrive together are applied in few transactions (one per notification
    /// of a purchase: a batch holds one of each) and leave what applying them one by one leaves:
    /// the same purchases, the same outcomes (`stale` included), the same rows in the change feed.
    @Test(arguments: [true, false])
    func notificationsThatArriveTogetherShareTransactionsAndLeaveWhatOneByOneLeaves(newestFirst: Bool) async throws {
        let payloads = try notifications(newestFirst: newestFirst)
        let (oneByOne, oneByOneOutcomes) = try await TestDatabase.with { db in
            let handler = try app.handler(db)
            var outcomes: [HandlingResult.Outcome] = []
            for payload in payloads { outcomes.append(try await handler.handle(signedPayload: payload, source: .webhook).outcome) }
            return (try await applied(db, handler), outcomes)
        }
        #expect(oneByOneOutcomes.contains(newestFirst ? .stale : .applied))
        try await TestDatabase.with { db in
            let handler = try app.handler(db)
            let batcher = NotificationBatcher(configuration: .init(workers: 1), logger: TestDatabase.logger)
            let results = try await submitThenRun(payloads, handler: handler, batcher: batcher)
            #expect(batcher.appliedBatches == 3)
            #expect(results.map { (try? $0.get().outcome) } == oneByOneOutcomes)
            let batched = try await applied(db, handler)
            #expect(batched.states.count == 8)
            #expect(batched == oneByOne)
            #expect(batched.states["7000"]?.autoRenewStatus == 0)
            #expect(batched.states["7000"]?.latestTransactionId == "7000-1")
            #expect(try await db.count("SELECT count(*) FROM notifications WHERE source = 'webhook'") == payloads.count)
        }
    }

    /// Beyond the configured number of waiting notifications, one more is refused at once with a
    /// retryable code (503: Apple delivers it again) and is not stored; those waiting are stored.
    @Test func beyondTheWaitingLimitANotificationIsRefusedAtOnce() async throws {
        try await TestDatabase.with { db in
            let handler = try app.handler(db)
            let payloads = try notifications().enumerated().filter { $0.offset % 3 == 0 }.prefix(3).map(\.element)  // three purchases
            let batcher = NotificationBatcher(configuration: .init(workers: 1, maximumWaiting: 2), logger: TestDatabase.logger)
            let refused = try await handler.verify(signedPayload: payloads[2])
            try await withThrowingTaskGroup(of: HandlingResult?.self) { group in
                for payload in payloads.prefix(2) {
                    let notification = try await handler.verify(signedPayload: payload)
                    group.addTask { try await batcher.handle(notification, by: handler, forwarding: nil) }
                }
                while batcher.waiting < 2 { await Task.yield() }
                let error = await #expect(throws: ReconcilerError.self) { try await batcher.handle(refused, by: handler, forwarding: nil) }
                #expect(error?.code == .overloaded)
                #expect(error?.code.exitClass == .retryable)
                group.addTask {
                    try await batcher.run()
                    return nil
                }
                for _ in 0..<2 { #expect(try await group.next()??.outcome == .applied) }
                group.cancelAll()
            }
            #expect(try await db.count("SELECT count(*) FROM notifications") == 2)
            #expect(try await db.count("SELECT count(*) FROM notifications WHERE notification_uuid = \(refused.notificationUUID)") == 0)
        }
    }

    /// A notification the database refuses (here a trigger refuses its UUID) fails alone: the
    /// others of its batch are stored and answered.
    @Test func aNotificationTheDatabaseRefusesFailsAloneNotItsBatch() async throws {
        try await TestDatabase.with { db in
            let handler = try app.handler(db)
            let payloads = try notifications().enumerated().filter { $0.offset % 3 == 0 }.prefix(3).map(\.element)  // three purchases
            let refused = try await handler.verify(signedPayload: payloads[1]).notificationUUID
            try await db.execute(
                """
                CREATE FUNCTION refuse_one() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    IF NEW.notification_uuid = '\(unescaped: refused)' THEN RAISE EXCEPTION 'refused by the test'; END IF;
                    RETURN NEW;
                END $$
                """)
            try await db.execute("CREATE TRIGGER refuse_one BEFORE INSERT ON notifications FOR EACH ROW EXECUTE FUNCTION refuse_one()")
            let batcher = NotificationBatcher(configuration: .init(workers: 1), logger: TestDatabase.logger)
            let results = try await submitThenRun(payloads, handler: handler, batcher: batcher)
            #expect((try? results[0].get().outcome) == .applied)
            #expect((try? results[1].get()) == nil)
            #expect((try? results[2].get().outcome) == .applied)
            #expect(batcher.appliedBatches == 0)
            #expect(try await db.count("SELECT count(*) FROM notifications") == 2)
            #expect(try await db.count("SELECT count(*) FROM notifications WHERE notification_uuid = \(refused)") == 0)
        }
    }

    /// Once stopped, a notification is refused with a retryable code (the webhook answers 503 and
    /// Apple delivers it again) and nothing is written.
    @Test func aStoppedBatcherRefusesAndStoresNothing() async throws {
        try await TestDatabase.with { db in
            let handler = try app.handler(db)
            let batcher = NotificationBatcher(logger: TestDatabase.logger)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await batcher.run() }
                group.cancelAll()
                try await group.waitForAll()
            }
            let notification = try await handler.verify(signedPayload: try notifications()[0])
            let error = await #expect(throws: ReconcilerError.self) { try await batcher.handle(notification, by: handler, forwarding: nil) }
            #expect(error?.code == .stopping)
            #expect(error?.code.exitClass == .retryable)
            #expect(try await db.count("SELECT count(*) FROM notifications") == 0)
        }
    }

    /// A batch starts beside one being applied only once `overlapAt` notifications wait: while the
    /// first (its purchase locked by the test) waits, three more arrive and are applied together,
    /// where an idle worker used to take the first of them alone at once.
    @Test func aSecondBatchStartsBesideTheFirstOnlyOnceEnoughWait() async throws {
        try await TestDatabase.with { db in
            let handler = try app.handler(db)
            let payloads = try notifications().enumerated().filter { $0.offset % 3 == 2 }.prefix(4).map(\.element)  // four purchases
            let verified = try await payloads.asyncMap { try await handler.verify(signedPayload: $0) }
            let batcher = NotificationBatcher(configuration: .init(workers: 2, overlapAt: 3), logger: TestDatabase.logger)
            // The lock the batch takes on its purchase (PurchaseStore.lock), held on a connection of the test's.
            let lock: PostgresQuery =
                "SELECT hashtext(\(TestApp.bundleId) || ' Production ' || \(verified[0].originalTransactionId ?? ""))"
            try await db.client.withConnection { holder in
                let key = try await holder.query(lock, logger: TestDatabase.logger).collect().first!.decode(Int32.self)
                try await holder.query("SELECT pg_advisory_lock(727002, \(key))", logger: TestDatabase.logger)
                try await withThrowingTaskGroup(of: (Int, HandlingResult)?.self) { group in
                    group.addTask {
                        try await batcher.run()
                        return nil
                    }
                    group.addTask { (0, try await batcher.handle(verified[0], by: handler, forwarding: nil)) }
                    // The first batch is taken (and waits for the lock) before the others arrive.
                    while batcher.waiting > 0 { await Task.yield() }
                    while try await !Self.waitsForALock(db) { await Task.yield() }
                    for index in 1..<4 {
                        group.addTask { (index, try await batcher.handle(verified[index], by: handler, forwarding: nil)) }
                    }
                    var answered: [Int] = []
                    while answered.count < 3, let (index, result) = try await group.next() ?? nil {
                        #expect(result.outcome == .applied)
                        answered.append(index)
                    }
                    #expect(answered.sorted() == [1, 2, 3])
                    #expect(batcher.appliedBatches == 1, "the three waiting were applied together, beside the first")
                    try await holder.query("SELECT pg_advisory_unlock(727002, \(key))", logger: TestDatabase.logger)
                    #expect(try await group.next()??.0 == 0)
                    #expect(batcher.appliedBatches == 2)
                    group.cancelAll()
                }
            }
        }
    }

    /// A purchase whose notification is in a batch being applied is left out of the batches that
    /// start meanwhile, though a worker is free: the purchase's newer notification arrives while
    /// the batch of its older one waits (for another purchase's lock, held by the test, which that
    /// batch takes first), and is applied only after it. So the older one comes out `applied` with
    /// its row in the change feed, as applying them one by one in arrival order leaves it, not
    /// `stale` without one.
    @Test func aPurchaseInABatchBeingAppliedIsLeftOutOfTheNextBatch() async throws {
        try await TestDatabase.with { db in
            let handler = try app.handler(db)
            let payloads = try notifications(newestFirst: false)  // per purchase: bought, renewed, disabled
            // The purchases' lock keys (PurchaseStore.lock takes a batch's keys in this order): the first
            // batch waits for the lowest, holding no lock of the purchase with the highest.
            var keys: [(key: Int32, index: Int)] = []
            for index in 0..<8 {
                let query: PostgresQuery = "SELECT hashtext(\(TestApp.bundleId) || ' Production ' || \("\(7000 + index)"))"
                keys.append((try await db.client.query(query, logger: TestDatabase.logger).collect().first!.decode(Int32.self), index))
            }
            keys.sort { $0.key < $1.key }
            let (blocking, purchase) = (keys[0], keys[7].index)
            let blocker = try await handler.verify(signedPayload: payloads[3 * blocking.index])
            let (older, newer) = (
                try await handler.verify(signedPayload: payloads[3 * purchase]), try await handler.verify(signedPayload: payloads[3 * purchase + 1])
            )
            // A second batch may start beside the first as soon as one notification waits.
            let batcher = NotificationBatcher(configuration: .init(workers: 2, overlapAt: 1), logger: TestDatabase.logger)
            try await db.client.withConnection { holder in
                try await holder.query("SELECT pg_advisory_lock(727002, \(blocking.key))", logger: TestDatabase.logger)
                try await withThrowingTaskGroup(of: (Int, HandlingResult)?.self) { group in
                    // The blocker and the older notification wait together, so the first batch takes both.
                    for (index, notification) in [blocker, older].enumerated() {
                        group.addTask { (index, try await batcher.handle(notification, by: handler, forwarding: nil)) }
                    }
                    while batcher.waiting < 2 { await Task.yield() }
                    group.addTask {
                        try await batcher.run()
                        return nil
                    }
                    while batcher.waiting > 0 { await Task.yield() }
                    while try await !Self.waitsForALock(db) { await Task.yield() }
                    group.addTask { (2, try await batcher.handle(newer, by: handler, forwarding: nil)) }
                    // The free worker either takes it at once (it is never seen waiting, and its batch
                    // commits while the first waits) or leaves it waiting.
                    while batcher.waiting == 0, batcher.appliedBatches == 0 { await Task.yield() }
                    #expect(batcher.waiting == 1, "the newer notification waits for the batch that holds its purchase")
                    try await holder.query("SELECT pg_advisory_unlock(727002, \(blocking.key))", logger: TestDatabase.logger)
                    var outcomes: [Int: HandlingResult.Outcome] = [:]
                    while outcomes.count < 3, let (index, result) = try await group.next() ?? nil { outcomes[index] = result.outcome }
                    #expect(outcomes == [0: .applied, 1: .applied, 2: .applied])
                    #expect(batcher.appliedBatches == 2)
                    group.cancelAll()
                }
            }
            let original = "\(7000 + purchase)"
            // Each of the two changed the purchase: two purchase rows in the feed (a stale one leaves a notification row).
            let feed = try await db.strings("SELECT kind FROM purchase_changes WHERE original_transaction_id = \(original) ORDER BY change_id")
            #expect(feed == ["purchase", "purchase"])
            let state = try await db.database.transaction { try await handler.store.purchaseStates([original], on: $0) }[original]
            #expect(state?.latestTransactionId == "\(original)-1")
        }
    }

    /// Whether a session of the database waits for an advisory lock.
    static func waitsForALock(_ db: TestDatabase) async throws -> Bool {
        try await db.count("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted") > 0
    }
}
