import AppStoreServer
import Foundation
import MockAppStore
import PostgresNIO
import ReconcilerDomain
import ReconcilerShared
import TestSupport
import Testing

@testable import Forwarder
@testable import ReconcilerStore

/// `forward --redeliver`: the notifications of a window are queued again as new rows for the
/// webhook chosen, acknowledged ones included, and sent with `Reconciler-Redelivery: 1`; a
/// notification whose payload was pruned is listed, not sent; a dry run counts the same.
@Suite(.serialized, .timeLimit(.minutes(5))) struct RedeliveryTests {
    let app: TestApp
    init() throws { app = try TestApp() }

    static func forwarder(url: String, db: TestDatabase) -> Forwarder {
        Forwarder(
            configuration: .init(url: ForwardingURL(url), concurrency: 2, initialBackoff: .milliseconds(50), pollInterval: .milliseconds(20)),
            database: db.database)
    }

    @Test func aRedeliveryReachesOnlyTheChosenTargetOncePerNotificationWithItsHeader() async throws {
        try await TestDatabase.with { db in
            try await AppWebhookReceiver.withRunning(.init()) { first, firstURL in
                try await AppWebhookReceiver.withRunning(.init()) { second, secondURL in
                    let uuids = try await app.recordForwarded(3, to: firstURL, in: db, purchasePrefix: "redeliver")
                    #expect(try await Self.forwarder(url: firstURL, db: db).deliverDue() == 3)
                    #expect(first.statistics.acknowledged == Dictionary(uniqueKeysWithValues: uuids.map { ($0, 1) }))
                    // One of them pruned: listed, never sent.
                    try await db.execute(
                        "UPDATE notifications SET payload_form = 'pruned', signed_payload = NULL, payload = NULL, signature = NULL, transaction_signature = NULL, renewal_signature = NULL WHERE notification_uuid = \(uuids[0])"
                    )
                    let queue = ForwardQueue(database: db.database)
                    let target = app.scope().target
                    let window = TimeWindow(start: .now - .seconds(3600), end: .now + .seconds(3600))
                    let (firstRoute, secondRoute) = (
                        ForwardingRoute(target: ForwardingTarget(url: firstURL)), ForwardingRoute(target: ForwardingTarget(url: secondURL))
                    )
                    let rowsBefore = try await db.count("SELECT count(*) FROM forward_redeliveries")
                    let dry = try await queue.redeliver(app: target, route: secondRoute, window: window, types: .init([]), dryRun: true)
                    #expect(try await db.count("SELECT count(*) FROM forward_redeliveries") == rowsBefore, "a dry run queued rows")
                    let real = try await queue.redeliver(app: target, route: secondRoute, window: window, types: .init([]), dryRun: false)
                    #expect(real == dry)
                    #expect(real.queued == 2)
                    #expect(real.notSent == [.init(notificationUUID: uuids[0], reason: "payload pruned")])
                    // A window before them, another type, or a target that takes another type, takes nothing.
                    let before = try await queue.redeliver(
                        app: target, route: secondRoute, window: TimeWindow(start: window.start - .seconds(3600), end: window.start),
                        types: .init([]), dryRun: true)
                    #expect(before.queued == 0 && before.notSent.isEmpty)
                    let otherType = try await queue.redeliver(app: target, route: secondRoute, window: window, types: .init(["REFUND"]), dryRun: true)
                    #expect(otherType.queued == 0)
                    let refundsOnly = ForwardingRoute(target: secondRoute.target, types: .init(["REFUND"]))
                    #expect(try await queue.redeliver(app: target, route: refundsOnly, window: window, types: .init([]), dryRun: true).queued == 0)
                    let sameType = try await queue.redeliver(
                        app: target, route: secondRoute, window: window, types: .init(["SUBSCRIBED/INITIAL_BUY"]), dryRun: true)
                    #expect(sameType.queued == 2)

                    // What waits for the second target is said (a drain waits for it; the gauges count it).
                    #expect(try await queue.pending(target: secondRoute.target, runIds: nil) == 2)
                    #expect(try await queue.summary(runIds: nil).pending == 2)
                    #expect(try await queue.waitingTargets().map(\.pending) == [2])
                    #expect(try await queue.summaries(of: target).first { $0.target == secondRoute.target }?.summary.pending == 2)
                    #expect(try await Self.forwarder(url: secondURL, db: db).deliverDue() == 2)
                    #expect(try await Self.forwarder(url: firstURL, db: db).deliverDue() == 0, "the first target got a redelivery")
                    let redelivered = Dictionary(uniqueKeysWithValues: uuids.dropFirst().map { ($0, 1) })
                    #expect(second.statistics.acknowledged == redelivered)
                    #expect(second.statistics.redelivered == redelivered)
                    #expect(first.statistics.acknowledged == Dictionary(uniqueKeysWithValues: uuids.map { ($0, 1) }))
                    #expect(first.statistics.redelivered.isEmpty)

                    // Again to the first target, whose rows for them are delivered already: new rows.
                    let again = try await queue.redeliver(app: target, route: firstRoute, window: window, types: .init([]), dryRun: false)
                    #expect(again.queued == 2)
                    #expect(try await Self.forwarder(url: firstURL, db: db).deliverDue() == 2)
                    #expect(first.statistics.redelivered == redelivered)
                    #expect(first.statistics.acknowledged[uuids[1]] == 2)
                    #expect(second.statistics.acknowledged == redelivered, "the second target got another's redelivery")
                    // First deliveries keep one row per notification and webhook.
                    #expect(try await db.count("SELECT count(*) FROM forward_queue") == 3)
                    #expect(try await db.count("SELECT count(*) FROM forward_redeliveries WHERE status = 'delivered'") == 4)
                    #expect(try await queue.summary(runIds: nil).delivered == 3 + 4)
                    // A redelivery out of attempts is tried again by `forward --retry-failed`, as a first delivery is.
                    try await db.execute(
                        "UPDATE forward_redeliveries SET status = 'failed', attempts = 12 WHERE redelivery_id = (SELECT min(redelivery_id) FROM forward_redeliveries)"
                    )
                    #expect(try await queue.retryFailed(target: firstRoute.target) + queue.retryFailed(target: secondRoute.target) == 1)
                    #expect(try await db.count("SELECT count(*) FROM forward_redeliveries WHERE status = 'pending' AND attempts = 0") == 1)
                    #expect(try await Self.forwarder(url: secondURL, db: db).deliverDue() + Self.forwarder(url: firstURL, db: db).deliverDue() == 1)
                    // Pruning delivered rows takes the redeliveries too.
                    #expect(try await Pruner(database: db.database).prune(.deliveredForwards, before: Date().addingTimeInterval(3600)) == 3 + 4)
                    #expect(try await db.count("SELECT count(*) FROM forward_redeliveries") == 0)
                }
            }
        }
    }
}
