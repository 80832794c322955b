import AppStoreServer
import Foundation
import Hummingbird
import Logging
import MockAppStore
import NIOHTTP1
import PostgresNIO
import Reconciler
import ReconcilerDomain
import ReconcilerStore
import ServiceLifecycle
import ServiceLifecycleTestKit
import TestSupport
import Testing
import WebhookServer

@testable import Forwarder

/// Graceful shutdown of the long-running services, in process: the test triggers the shutdown a
/// signal would (`ServiceLifecycleTestKit`, or the task cancellation a signal causes) while a
/// delivery is in flight or the work waits on its database, and sees the service finish what it
/// holds, record it, take nothing more and return, or the work end as an interruption. One test per
/// command still sends a real signal to the real process (exit codes on signals are part of the
/// contract): `serve` (LivePathCLITests.migrateServeExportAndInspect), `forward`
/// (ForwardCommandTests), `run` (ReconcileRunTests.sigtermStopsARunCleanlyAndTheRerunResumesIt),
/// `repair` (RepairTests), `changes --follow` (ChangeFeedTests.aFollowerWakesOnNotifyReconnectsAndStopsCleanly).
@Suite(.timeLimit(.minutes(5))) struct GracefulShutdownTests {
    let app: TestApp
    init() throws { app = try TestApp() }

    static func forwarder(url: String, db: TestDatabase) -> Forwarder {
        Forwarder(
            configuration: .init(url: ForwardingURL(url), concurrency: 1, pollInterval: .milliseconds(20), worker: "graceful"),
            database: db.database)
    }

    /// The queue's rows, by notification: status and attempts.
    static func queue(_ db: TestDatabase) async throws -> [String] {
        try await db.strings("SELECT notification_uuid || ' ' || status || ' ' || attempts FROM forward_queue ORDER BY notification_uuid")
    }

    /// `forward`'s service: shut down while the app holds its delivery, the forwarder waits for the
    /// answer, records it and returns, leaving no delivery leased: what it did not send waits in
    /// the queue for the next forwarder, and every delivery the app acknowledged is recorded.
    @Test func theForwarderFinishesItsDeliveryInFlightAndLeavesNothingLeased() async throws {
        try await TestDatabase.with { db in
            try await AppWebhookReceiver.withRunning(.init()) { receiver, url in
                let uuids = try await app.recordForwarded(2, to: url, in: db, purchasePrefix: "graceful")
                receiver.hold()
                let forwarder = Self.forwarder(url: url, db: db)
                var inFlight = ""
                try await testGracefulShutdown { shutdown in
                    let running = Task { try await forwarder.run() }
                    try await eventually("one delivery in flight") { receiver.statistics.inFlight == 1 }
                    inFlight = try #require(receiver.statistics.inFlightByNotification.keys.first)
                    shutdown.triggerGracefulShutdown()
                    receiver.release()
                    try await running.value
                }
                let acknowledged = receiver.statistics.acknowledged
                #expect(acknowledged[inFlight] == 1)
                let rows = try await Self.queue(db)
                #expect(rows.count == uuids.count && !rows.contains { $0.contains(" leased ") }, "\(rows)")
                for uuid in acknowledged.keys { #expect(rows.contains("\(uuid) delivered 1"), "\(rows)") }
            }
        }
    }

    /// `serve`'s services (the webhook with its batcher, and a forwarder), as `serve` runs them, shut
    /// down while a notification the webhook stored is being delivered: the delivery finishes and
    /// is recorded, the application returns, and the port is closed.
    @Test func serveStopsListeningAndItsForwarderFinishesItsDelivery() async throws {
        try await TestDatabase.with { db in
            try await AppWebhookReceiver.withRunning(.init()) { receiver, url in
                receiver.hold()
                let server = WebhookServer(
                    configuration: .init(host: "127.0.0.1", port: 0, forwardTo: ForwardingTarget(url: url)), handler: try app.handler(db),
                    logger: TestDatabase.logger)
                let (ports, bound) = AsyncStream.makeStream(of: Int.self)
                let application = server.makeApplication(services: [Self.forwarder(url: url, db: db)], onServerRunning: { bound.yield($0) })
                var port = 0
                try await testGracefulShutdown { shutdown in
                    // serve's path (runService), without taking the test process's signals.
                    let running = Task { try await application.runService(gracefulShutdownSignals: []) }
                    var iterator = ports.makeAsyncIterator()
                    port = try #require(await iterator.next())
                    let uuid = UUID().uuidString.lowercased()
                    let signed = app.start + 86_400_000
                    let payload = try app.notification(
                        .subscribed, .initialBuy, uuid: uuid, signedDate: signed,
                        transaction: app.subscription(original: "graceful-serve", period: 0, signedDate: signed), status: .active)
                    let reply = try await HTTP.postNotification("http://127.0.0.1:\(port)/notifications", signedPayload: payload)
                    #expect(reply.status == 200, "\(String(decoding: reply.body, as: UTF8.self))")
                    try await eventually("the delivery in flight") { receiver.statistics.inFlight == 1 }
                    shutdown.triggerGracefulShutdown()
                    receiver.release()
                    try await running.value
                    #expect(receiver.statistics.acknowledged == [uuid: 1])
                    #expect(try await Self.queue(db) == ["\(uuid) delivered 1"])
                }
                #expect(!connectAndClose(port: port), "still listening after the shutdown")
            }
        }
    }

    /// `serve`'s application with its database away (it listens anyway, /health 503): the shutdown
    /// a signal triggers still ends it cleanly (the application returns, so serve exits 0) and
    /// closes the port. Was UnreachableDatabaseTests' SIGTERM to such a serve.
    @Test func serveWithItsDatabaseAwayStopsCleanly() async throws {
        let database = try Database(
            settings: DatabaseSettings(url: "postgres://alice@127.0.0.1:\(freePort())/reconciler"), logger: TestDatabase.logger,
            configuration: .init(unavailableTimeout: .seconds(1), attemptTimeout: .seconds(1)))
        let handler = NotificationHandler(
            scope: app.scope(), verifier: try SignedDataVerifier(configuration: app.verifierConfiguration), database: database)
        let server = WebhookServer(configuration: .init(host: "127.0.0.1", port: 0), handler: handler, logger: TestDatabase.logger)
        let (ports, bound) = AsyncStream.makeStream(of: Int.self)
        let application = server.makeApplication(services: [database], onServerRunning: { bound.yield($0) })
        var port = 0
        try await testGracefulShutdown { shutdown in
            let running = Task { try await application.runService(gracefulShutdownSignals: []) }
            var iterator = ports.makeAsyncIterator()
            port = try #require(await iterator.next())
            #expect((try await HTTP.request(.GET, "http://127.0.0.1:\(port)/health")).status == 503)
            shutdown.triggerGracefulShutdown()
            try await running.value
        }
        #expect(!connectAndClose(port: port), "still listening after the shutdown")
    }

    /// A command's first connection, waiting for a database that is away (refused, retried until
    /// --database-timeout), ends at once when a signal cancels it (`untilSignalled` cancels the
    /// wait), and the command ends as one interrupted during its work: exit 2, "interrupted". Was
    /// UnreachableDatabaseTests' SIGTERM to a waiting `run`.
    @Test func aFirstConnectionWaitingForTheDatabaseEndsAsAnInterruption() async throws {
        let settings = try DatabaseSettings(url: "postgres://alice@127.0.0.1:\(freePort())/reconciler")
        let records = RecordingLogHandler.Records()
        let logger = Logger(label: "first-connection") { _ in RecordingLogHandler(records) }
        let waiting = Task { try await settings.checkConnection(within: .seconds(300), logger: logger) }
        try await eventually("an attempt refused") { records.messages.contains { $0.contains("connecting to the database failed") } }
        waiting.cancel()
        let ending: ReconcilerError?
        do {
            try await waiting.value
            ending = nil
        } catch {
            ending = ReconcilerError(endingCommandWith: error)
        }
        let interruption = try #require(ending, "the wait went on after the cancellation, or ended unclassified")
        #expect(interruption.exitCode == 2)
        #expect(interruption.operatorMessage.contains("interrupted"), "\(interruption.operatorMessage)")
    }

    /// Work waiting on a database that went away (its store call retrying for a long
    /// --database-timeout, as a run holding its lease does) ends at once when a signal cancels the
    /// command's work, and ends as an interruption: exit 2. Was ScheduleTests' SIGTERM to a run
    /// whose database was stopped under it.
    @Test func workWaitingOnADatabaseThatIsGoneEndsAsAnInterruption() async throws {
        let records = RecordingLogHandler.Records()
        let logger = Logger(label: "gone") { _ in RecordingLogHandler(records) }
        let database = try Database(
            settings: DatabaseSettings(url: "postgres://alice@127.0.0.1:\(freePort())/reconciler"), logger: logger,
            configuration: .init(unavailableTimeout: .seconds(600), attemptTimeout: .seconds(1)))
        let ending: ReconcilerError? = try await withThrowingTaskGroup(of: ReconcilerError?.self) { group in
            group.addTask {
                try await database.run()
                return nil
            }
            // Its BEGIN needs a connection the pool cannot open.
            let work = Task { try await database.transaction { _ in 1 } }
            try await eventually("the work retrying") { records.messages.contains { $0.contains("the database is unreachable; retrying") } }
            work.cancel()
            defer { group.cancelAll() }
            do {
                _ = try await work.value
                return nil
            } catch {
                return ReconcilerError(endingCommandWith: error)
            }
        }
        let interruption = try #require(ending, "the work went on after the cancellation, or ended unclassified")
        #expect(interruption.exitCode == 2)
        #expect(interruption.operatorMessage.contains("interrupted"), "\(interruption.operatorMessage)")
    }
}
