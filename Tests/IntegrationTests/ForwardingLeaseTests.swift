import AppStoreServer
import Foundation
import MockAppStore
import PostgresNIO
import ReconcilerDomain
import TestSupport
import Testing

@testable import Forwarder
@testable import Reconciler
@testable import ReconcilerStore

/// Forwarders sharing one queue never have the same delivery in flight at once, and a delivery
/// that gets no answer says why in plain words. (`forward --once`, the process, with a down
/// endpoint and with a delivery that cannot be rebuilt: EndToEndTests' ForwardCommandTests.)
/// The app's webhook is ``AppWebhookReceiver`` holding every delivery unanswered until the test
/// releases it, so a delivery stays in flight as long as the test needs, past any lease. The
/// forwarder that sends judges its leases on a manual clock the test moves; the database judges
/// the rows by its own `now()`, which the test cannot move, so where a lease must have run out
/// there the test moves the row's `lease_until` back instead. (The time limit ends a run whose
/// forwarder ignored its clock: the test would wait for sleepers on it that never come.)
@Suite(.serialized, .timeLimit(.minutes(5))) struct ForwardingLeaseTests {
    let app: TestApp
    init() throws { app = try TestApp() }

    /// Queues `count` live notifications for `url`.
    func queue(_ count: Int, for url: String, in db: TestDatabase) async throws -> [String] {
        try await app.recordForwarded(count, to: url, in: db, purchasePrefix: "lease")
    }

    /// A forwarder with a 10-minute lease (renewed every 150 s of `clock`, which no test run
    /// outlasts on the database's clock) and an app that may take all the time it wants.
    static func forwarder(
        _ worker: String, url: String, concurrency: Int, db: TestDatabase, clock: any MonotonicClock = .system
    ) -> Forwarder {
        Forwarder(
            configuration: .init(
                url: ForwardingURL(url), concurrency: concurrency, timeout: .seconds(600), leaseDuration: .seconds(600),
                initialBackoff: .milliseconds(50), pollInterval: .milliseconds(20), worker: worker, clock: clock),
            database: db.database)
    }

    /// Two forwarders run side by side while the app holds every delivery for longer than a
    /// lease lasts: the app never has one notification in flight twice, the forwarder sending
    /// keeps its leases by renewing them (the other, asked once more after the first leases ran
    /// out, takes none), and every notification is answered once.
    @Test func aDeliveryIsNeverInFlightFromTwoForwarders() async throws {
        try await TestDatabase.with { db in
            try await AppWebhookReceiver.withRunning(.init()) { receiver, url in
                let uuids = try await queue(3, for: url, in: db)
                receiver.hold()
                // A's time moves only when the test moves it; B's is the system's.
                let clock = ManualClock()
                let first = Self.forwarder("A", url: url, concurrency: 3, db: db, clock: clock)
                let second = Self.forwarder("B", url: url, concurrency: 3, db: db)
                let stop = Locked(false)
                let firstRunning = Task { await first.run(until: { stop.withLock { $0 } }) }
                try await eventually("A sending every notification") { Set(receiver.statistics.inFlightByNotification.keys) == Set(uuids) }
                // Past the leases A took first, by the database's clock: as it would see them a
                // whole lease later, had A not renewed them.
                try await db.execute("UPDATE forward_queue SET lease_until = lease_until - interval '600 seconds'")
                #expect(try await db.count("SELECT count(*) FROM forward_queue WHERE status = 'leased' AND lease_until < now()") == 3)
                // A quarter of a lease on by A's clock (its renewer and the watch of each request
                // asleep on it), A renews them.
                await clock.waitForSleepers(4)
                clock.advance(by: .seconds(150))
                try await eventually("A to renew its leases") {
                    try await db.count(
                        "SELECT count(*) FROM forward_queue WHERE status = 'leased' AND worker = 'A' AND lease_until > now() + interval '300 seconds'"
                    )
                        == 3
                }
                let secondRunning = Task { await second.run(until: { stop.withLock { $0 } }) }
                #expect(try await second.deliverDue() == 0, "B took a delivery A is sending")
                #expect(receiver.statistics.deliveredTwiceAtOnce.isEmpty, "\(receiver.statistics)")

                receiver.release()
                try await eventually("every delivery recorded") {
                    try await db.count("SELECT count(*) FROM forward_queue WHERE status = 'delivered'") == 3
                }
                stop.withLock { $0 = true }
                // A, idle, waits for its next look on its clock, which the test no longer moves.
                firstRunning.cancel()
                await firstRunning.value
                await secondRunning.value
                let statistics = receiver.statistics
                #expect(statistics.acknowledged == Dictionary(uniqueKeysWithValues: uuids.map { ($0, 1) }), "\(statistics)")
                #expect(statistics.deliveredTwiceAtOnce.isEmpty, "\(statistics)")
            }
        }
    }

    /// A forwarder whose lease passed to another one (here by hand, as after a long stall) stops
    /// its request at its next renewal and records nothing; the other forwarder's lease stands.
    /// The stop comes from the renewal: A's clock never reaches the point (three quarters of the
    /// lease on) where A would stop for fear of the lease running out.
    @Test func aForwarderThatLostItsLeaseStopsSending() async throws {
        try await TestDatabase.with { db in
            try await AppWebhookReceiver.withRunning(.init()) { receiver, url in
                _ = try await queue(1, for: url, in: db)
                receiver.hold()
                let clock = ManualClock()
                let forwarder = Self.forwarder("A", url: url, concurrency: 1, db: db, clock: clock)
                let stopped = Locked(false)
                let sending = Task {
                    defer { stopped.withLock { $0 = true } }
                    return try await forwarder.deliverDue()
                }
                try await eventually("A sending") { receiver.statistics.inFlight == 1 }
                try await db.execute(
                    "UPDATE forward_queue SET worker = 'B', lease_token = gen_random_uuid(), lease_until = now() + interval '1 hour'")
                // A's renewal, a quarter of the lease on by its clock, finds the lease gone; the
                // request's watch sees it at its next wake, half a quarter later.
                await clock.waitForSleepers(2)
                clock.advance(to: .seconds(150))
                try await eventually("A's renewal") { clock.deadlines.contains(.seconds(300)) || stopped.withLock { $0 } }
                clock.advance(to: .seconds(225))
                // Ends without the app answering: A stopped its request, and the app saw it go.
                #expect(try await sending.value == 1)
                try await eventually("the request closed") { receiver.statistics.abandoned == 1 }
                #expect(try await db.strings("SELECT status || ' ' || worker || ' ' || attempts FROM forward_queue") == ["leased B 0"])
                receiver.release()
            }
        }
    }

    /// The other ways a delivery gets no answer read as plainly: an app that does not answer in
    /// time, a TLS handshake with an endpoint that speaks plain HTTP, a host name that does not resolve.
    @Test func deliveryFailuresSayWhatHappenedInPlainWords() async throws {
        try await TestDatabase.with { db in
            try await AppWebhookReceiver.withRunning(.init()) { receiver, url in
                receiver.hold()
                defer { receiver.release() }
                let delivery = ForwardQueue.Delivery(
                    notificationUUID: "u", target: ForwardingTarget(url: url), signedPayload: "x.y.z", attempts: 0, leaseToken: UUID())
                func failure(_ url: String, timeout: Duration) async -> String {
                    let forwarder = Forwarder(configuration: .init(url: ForwardingURL(url), timeout: timeout), database: db.database)
                    switch await forwarder.send(delivery) {
                    case .retry(_, let error, _), .failed(_, let error): return error
                    case .delivered: return "delivered"
                    }
                }
                #expect(await failure(url, timeout: .milliseconds(300)) == "no answer from \(url) within 300ms (timed out)")
                let https = url.replacingOccurrences(of: "http:", with: "https:")
                let tls = await failure(https, timeout: .seconds(10))
                #expect(tls.hasPrefix("TLS handshake with \(https) failed"), "\(tls)")
                let unknown = await failure("http://no-such-host.invalid/notifications", timeout: .seconds(10))
                #expect(unknown.hasPrefix("host name not found: no-such-host.invalid"), "\(unknown)")
            }
        }
    }

    /// Consumption requests still before their deadline are leased before anything else, the
    /// soonest deadline first; a run's deliveries held back (an expired request among them) are not
    /// due until the run releases them, then in the order they were queued. A live delivery is never held.
    @Test func openConsumptionRequestsGoFirstAndHeldDeliveriesWaitForTheirRelease() async throws {
        try await TestDatabase.with { db in
            let url = "http://127.0.0.1:9/notifications"
            let target = ForwardingTarget(url: url)
            let live = try await app.recordForwarded(2, to: url, in: db, purchasePrefix: "live")
            let handler = try app.handler(db)
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            func notification(_ type: NotificationTypeV2, _ original: String, signedDate: Int64) async throws -> VerifiedNotification {
                var verified = try await handler.verify(
                    signedPayload: try app.notification(
                        type, signedDate: signedDate,
                        transaction: app.oneTime(original, purchaseDate: signedDate - 60_000, signedDate: signedDate)))
                verified.firstSendAttempt = signedDate + 500
                return verified
            }
            // A run's page while it holds: an open request due in 11 h, one due in 10 h, one past its
            // deadline and a charge; then the live webhook's (never held).
            let page = [
                try await notification(.consumptionRequest, "9101", signedDate: now - 3_600_000),
                try await notification(.consumptionRequest, "9102", signedDate: now - 7_200_000),
                try await notification(.consumptionRequest, "9103", signedDate: now - 13 * 3_600_000),
                try await notification(.oneTimeCharge, "9104", signedDate: now - 60_000),
            ]
            _ = try await handler.record(page, source: .history(runId: 9), forwarding: .init(target: target, hold: .seconds(600)))
            #expect(try await db.count("SELECT count(*) FROM forward_queue WHERE held") == 2)
            let queue = ForwardQueue(database: db.database)
            func leaseAll() async throws -> [(uuid: String, urgent: Bool)] {
                var leased: [(uuid: String, urgent: Bool)] = []
                while let delivery = try await queue.lease(target: target, worker: "w", token: UUID(), leaseDuration: .seconds(600)) {
                    leased.append((delivery.notificationUUID, delivery.urgent))
                }
                return leased
            }
            let first = try await leaseAll()
            #expect(first.map(\.uuid) == [page[1].notificationUUID, page[0].notificationUUID] + live)
            #expect(first.map(\.urgent) == [true, true, false, false])
            #expect(try await queue.releaseHeld(runId: 9) == 2)
            #expect(try await queue.releaseHeld(runId: 9) == 0)
            let released = try await leaseAll()
            #expect(Set(released.map(\.uuid)) == [page[2].notificationUUID, page[3].notificationUUID])
            #expect(released.allSatisfy { !$0.urgent })
        }
    }

    /// A run's drain releases the run's own deliveries still held back (its replay, and so its
    /// hold, is over), not an earlier run's.
    @Test func aRunsDrainReleasesWhatTheRunStillHolds() async throws {
        try await TestDatabase.with { db in
            let url = "http://127.0.0.1:9/notifications"
            let target = ForwardingTarget(url: url)
            let handler = try app.handler(db)
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            func charge(_ original: String) async throws -> VerifiedNotification {
                try await handler.verify(
                    signedPayload: try app.notification(
                        .oneTimeCharge, signedDate: now - 60_000,
                        transaction: app.oneTime(original, purchaseDate: now - 120_000, signedDate: now - 60_000)))
            }
            _ = try await handler.record(
                [try await charge("9201")], source: .history(runId: 7), forwarding: .init(target: target, hold: .seconds(600)))
            _ = try await handler.record(
                [try await charge("9202"), try await charge("9203")], source: .history(runId: 8),
                forwarding: .init(target: target, hold: .seconds(600)))
            #expect(try await db.count("SELECT count(*) FROM forward_queue WHERE held") == 3)
            let drained = try await Self.forwarder("w", url: url, concurrency: 1, db: db).drain(runIdsAndEarlier: [8], upTo: .zero)
            #expect(drained.earlierRuns == [7])
            #expect(try await db.count("SELECT count(*) FROM forward_queue WHERE held AND run_id = 8") == 0)
            #expect(try await db.count("SELECT count(*) FROM forward_queue WHERE held AND run_id = 7") == 1)
        }
    }
}
