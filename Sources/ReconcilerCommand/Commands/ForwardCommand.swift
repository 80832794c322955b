import ArgumentParser
import Forwarder
import Foundation
import Logging
import Reconciler
import ReconcilerShared

struct ForwardCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "forward",
        abstract: "Deliver the queued notifications to the app's own webhook: a long-running worker, or --once.",
        discussion: """
            `run --forward-to` and `serve --forward-to` queue notifications for the app's webhook in the transaction \
            that records them; this worker delivers what they left (a run waits only --forward-drain-timeout). Each \
            queued delivery keeps the URL it was queued for. Several workers may share the queue. A delivery the \
            app answered 2xx is never sent again; a worker killed between sending and recording the answer leaves \
            that one delivery to be sent again (at-least-once, like Apple: the app dedups by notificationUUID).

            Without --once it runs until SIGTERM or SIGINT. With --once it delivers what is due, waits for retries \
            up to --drain-timeout, prints where the queue stands and exits: 0 nothing left pending; 2 deliveries \
            still pending (retrying); 4 deliveries failed for good during this invocation (after \
            --forward-attempts tries; fix the app's endpoint, then --retry-failed).

              reconciler forward
              reconciler forward --once --drain-timeout 10m
              reconciler forward --once --retry-failed
            """)

    @Flag(help: "Deliver what is due, wait for retries up to --drain-timeout, then exit.") var once = false
    @Option(help: ArgumentHelp("With --once, how long to wait for retries (default 5m).", valueName: "duration")) var drainTimeout: String = "5m"
    @Flag(help: "First give the deliveries marked failed a new set of attempts (after the app's endpoint was fixed).") var retryFailed = false

    @OptionGroup var database: DatabaseOptions
    @OptionGroup(title: "Forwarding") var forwarding: ForwardingOptions
    @OptionGroup var logging: LoggingOptions

    func run() async throws {
        let logger = logging.makeLogger()
        let configuration = try forwarding.configuration()
        guard let drain = TimeArgument.duration(drainTimeout), drain >= 0 else {
            throw CommandError.configuration("--drain-timeout: \(drainTimeout) is not a duration such as 5m")
        }
        let (once, retryFailed) = (self.once, self.retryFailed)
        let (before, after) = try await database.runWork(logger: logger) { database in
            do {
                try await Migrator().requireCurrent(database.client, logger: logger)
            } catch let error as Migrator.MigrationError {
                throw CommandError.configuration(error.description)
            }
            let forwarder = Forwarder(configuration: configuration, database: database)
            if retryFailed {
                let store = PurchaseStore(logger: logger)
                let retried = try await database.transaction { try await store.retryFailedDeliveries(on: $0) }
                print("retrying \(retried) failed deliveries")
            }
            let before = try await forwarder.summary(runIds: nil)
            logger.info("forwarding", metadata: ["pending": "\(before.pending)", "failed": "\(before.failed)"])
            if once {
                _ = try await forwarder.drain(runIds: nil, upTo: .milliseconds(drain))
            } else {
                try await forwarder.run()
            }
            return (before, try await forwarder.summary(runIds: nil))
        }
        let delivered = after.delivered - before.delivered
        print(
            "forward: \(delivered) delivered now; queue: \(after.delivered) delivered, \(after.pending) pending, \(after.failed) failed"
                + (after.oldestPending.map { " (oldest pending queued \(ISO8601DateFormatter().string(from: $0)))" } ?? ""))
        guard once else { return }
        if after.failed > before.failed {
            throw CommandError.attention(
                "\(after.failed - before.failed) deliveries failed for good; fix the app's endpoint, then `reconciler forward --once --retry-failed`")
        }
        if after.pending > 0 {
            throw CommandError.partial(
                "\(after.pending) deliveries are still pending; they are retried by `reconciler forward`, the next run or `serve --forward-to`")
        }
    }
}
