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

/// Forwarders sharing one queue never have the same delivery in flight at once.
/// The app's webhook is ``AppWebhookReceiver`` holding every delivery unanswered until the test
/// releases it, so a delivery stays in flight as long as the test needs, past any lease, with
/// no clock in the test: it waits for conditions (the database's own `now()` included).
@Suite(.serialized) struct ForwardingLeaseTests {
    let app: TestApp
    init() throws { app = try TestApp() }

    /// Queues `count` live notifications for `url`.
    func queue(_ count: Int, for url: String, in db: TestDatabase) async throws -> [String] {
        try await app.recordForwarded(count, to: url, in: db, purchasePrefix: "lease")
    }

    /// A forwarder with a short lease and an app that may take all the time it wants.
    static func forwarder(_ worker: String, url: String, concurrency: Int, db: TestDatabase) -> Forwarder {
        Forwarder(
            configuration: .init(
                url: ForwardingURL(url), concurrency: concurrency, timeout: .seconds(600), leaseDuration: .seconds(8),
                initialBackoff: .milliseconds(50), pollInterval: .milliseconds(20), worker: worker),
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
                let (first, second) = (Self.forwarder("A", url: url, concurrency: 3, db: db), Self.forwarder("B", url: url, concurrency: 3, db: db))
                let stop = Locked(false)
                let firstRunning = Task { await first.run(until: { stop.withLock { $0 } }) }
                try await eventually("A sending every notification") { Set(receiver.statistics.inFlightByNotification.keys) == Set(uuids) }
                let secondRunning = Task { await second.run(until: { stop.withLock { $0 } }) }
                // Past the leases A took first, by the database's clock.
                let firstLeases = try await db.strings("SELECT max(lease_until)::text FROM forward_queue")[0]
                try await eventually("the first leases past") {
                    try await db.count("SELECT count(*) FROM forward_queue WHERE now() > \(firstLeases)::timestamptz + interval '1 second'") == 3
                }
                // A renewed them. (Only a process starved for most of a lease loses one; it then stops its
                // request before the lease can run out, which the receiver sees as abandoned, not twice.)
                let keptByA = try await db.count(
                    "SELECT count(*) FROM forward_queue WHERE status = 'leased' AND worker = 'A' AND lease_until > now() + interval '4 seconds'")
                let takenByB = try await second.deliverDue()
                if keptByA == 3 { #expect(takenByB == 0, "B took a delivery A is sending") }
                #expect(receiver.statistics.deliveredTwiceAtOnce.isEmpty, "\(receiver.statistics)")

                receiver.release()
                try await eventually("every delivery recorded") {
                    try await db.count("SELECT count(*) FROM forward_queue WHERE status = 'delivered'") == 3
                }
                stop.withLock { $0 = true }
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
    @Test func aForwarderThatLostItsLeaseStopsSending() async throws {
        try await TestDatabase.with { db in
            try await AppWebhookReceiver.withRunning(.init()) { receiver, url in
                _ = try await queue(1, for: url, in: db)
                receiver.hold()
                let forwarder = Self.forwarder("A", url: url, concurrency: 1, db: db)
                let sending = Task { try await forwarder.deliverDue() }
                try await eventually("A sending") { receiver.statistics.inFlight == 1 }
                try await db.execute(
                    "UPDATE forward_queue SET worker = 'B', lease_token = gen_random_uuid(), lease_until = now() + interval '1 hour'")
                // Ends without the app answering: A stopped its request, and the app saw it go.
                #expect(try await sending.value == 1)
                try await eventually("the request closed") { receiver.statistics.abandoned == 1 }
                #expect(try await db.strings("SELECT status || ' ' || worker || ' ' || attempts FROM forward_queue") == ["leased B 0"])
                receiver.release()
            }
        }
    }
}
