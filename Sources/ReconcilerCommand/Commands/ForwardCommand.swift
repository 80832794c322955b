import ArgumentParser
import Forwarder
import Foundation
import Logging
import Reconciler
import ReconcilerConfiguration
import ReconcilerDomain
import ReconcilerShared
import ReconcilerStore

struct ForwardCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "forward",
        abstract: "Deliver the queued notifications to the app's own webhook: a long-running worker, or --once.",
        discussion: """
            `run --forward-to` and `serve --forward-to` queue notifications for the app's webhook in the transaction \
            that records them; this worker delivers what they left (a run waits only --forward-drain-timeout). The \
            queue keeps no URL (only an id of it and its redacted form, since a URL may carry credentials): give \
            the worker the same URL with --forward-to or RECONCILER_FORWARD_TO, and it delivers the deliveries \
            queued for that URL; deliveries queued for another URL wait for a worker given that one (it names \
            them in its log). Several workers may share the queue: a delivery is never in flight from two at \
            once. A delivery the app answered 2xx is never sent again; a worker killed between sending and \
            recording the answer leaves that one delivery to be sent again (at-least-once, like Apple: the app \
            dedups by notificationUUID).

            With a configuration file (--config, RECONCILER_CONFIG) and no --forward-to, it delivers to each \
            configured app's forwardTo at once (each URL once; --app and --environment choose the apps); \
            --forward-to sends to one URL whatever the app. A URL delivers every delivery queued for it, of \
            whichever app.

            Without --once it runs until SIGTERM or SIGINT. With --once it delivers what is due, waits for retries \
            up to --drain-timeout, prints where the queue stands and exits: 0 nothing left pending for its URL; \
            2 deliveries still pending (retrying); 4 deliveries failed for good during this invocation (after \
            --forward-attempts tries: fix the app's endpoint, then --retry-failed; or at once, never sent, when a \
            delivery's stored signed payload cannot be rebuilt: the runbook says what to do); 1 no URL given.

              reconciler forward --forward-to https://app.internal/apple/notifications
              reconciler forward --once --drain-timeout 10m
              reconciler forward --once --retry-failed
              # that app's forwardTo
              reconciler forward --config /etc/reconciler/reconciler.yaml \\
                  --app com.example.two
            """)

    @Flag(help: "Deliver what is due, wait for retries up to --drain-timeout, then exit.") var once = false
    @Option(help: ArgumentHelp("With --once, how long to wait for retries.", valueName: "duration")) var drainTimeout: Duration =
        .minutes(5)
    @Flag(help: "First give the deliveries marked failed a new set of attempts (after the app's endpoint was fixed).") var retryFailed = false
    @Option(
        help: ArgumentHelp(
            "The app's own webhook (env RECONCILER_FORWARD_TO): the URL the deliveries were queued for, for every app; without it, each configured app's forwardTo.",
            valueName: "url"))
    var forwardTo: String?

    @OptionGroup var app: AppOptions
    @OptionGroup var database: DatabaseOptions
    @OptionGroup(title: "Forwarding") var forwarding: ForwardingOptions
    @OptionGroup var logging: LoggingOptions

    func run() async throws {
        let logger = logging.makeLogger()
        let urls = try webhooks()
        let configurations = try urls.map { url in
            var configuration = try forwarding.configuration(url: url)
            configuration.companionTargets = Set(urls.map(\.target.id))
            return configuration
        }
        let (once, retryFailed, targets) = (self.once, self.retryFailed, urls.map(\.target))
        let (before, after, others, pendingHere, unrebuildable) = try await database.runWork(logger: logger) { database in
            do {
                try await Migrator().requireCurrent(database)
            }
            // One forwarder per webhook, each delivering only what was queued for its URL.
            let forwarders = configurations.map { Forwarder(configuration: $0, database: database) }
            let queue = ForwardQueue(database: database)
            if retryFailed {
                for target in targets {
                    let retried = try await queue.retryFailed(target: target)
                    print("retrying \(retried) failed deliveries to \(target.redacted)")
                }
            }
            let before = (summary: try await queue.summary(runIds: nil), unrebuildable: try await queue.unrebuildable())
            for target in targets {
                logger.info(
                    "forwarding",
                    metadata: ["to": "\(target.redacted)", "pending": "\(before.summary.pending)", "failed": "\(before.summary.failed)"])
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for forwarder in forwarders {
                    group.addTask {
                        if once {
                            _ = try await forwarder.drain(runIds: nil, upTo: drainTimeout)
                        } else {
                            try await forwarder.run()
                        }
                    }
                }
                try await group.waitForAll()
            }
            var pendingHere = 0
            for target in targets {
                pendingHere += try await queue.pending(target: target, runIds: nil)
            }
            let others = try await queue.waitingTargets().filter { waiting in
                !targets.contains { $0.id == waiting.target.id }
            }
            let after = try await queue.summary(runIds: nil)
            return (before.summary, after, others, pendingHere, (before: before.unrebuildable, after: try await queue.unrebuildable()))
        }
        let delivered = after.delivered - before.delivered
        print(
            "forward: \(delivered) delivered now; queue: \(after.delivered) delivered, \(after.pending) pending, \(after.failed) failed"
                + (after.oldestPending.map { " (oldest pending queued \(ISO8601DateFormatter().string(from: $0)))" } ?? ""))
        if let line = ForwardQueue.unrebuildableLine(unrebuildable.after) { print(line) }
        for (target, pending) in others {
            print(
                "  \(pending) pending for another webhook, \(target.redacted): `reconciler forward --once --forward-to <that URL>` delivers them")
        }
        guard once else { return }
        if after.failed > before.failed {
            let failed = after.failed - before.failed
            let unrebuilt = max(0, unrebuildable.after - unrebuildable.before)
            guard unrebuilt > 0 else {
                throw ReconcilerError.attention(
                    "\(Plural.count(failed, "delivery", "deliveries")) failed for good; fix the app's endpoint, then `reconciler forward --once --retry-failed`"
                )
            }
            throw ReconcilerError.attention(
                "\(Plural.count(failed, "delivery", "deliveries")) failed for good, \(unrebuilt) of them because their stored signed payload cannot be rebuilt "
                    + "(never sent: see the runbook, \"A delivery that cannot be rebuilt\"); for the others fix the app's endpoint; "
                    + "then `reconciler forward --once --retry-failed`")
        }
        if pendingHere > 0 {
            throw ReconcilerError.partial(
                "\(Plural.count(pendingHere, "delivery", "deliveries")) still pending; they are retried by `reconciler forward`, the next run or `serve --forward-to`"
            )
        }
    }

    /// The webhooks to deliver to: --forward-to (or RECONCILER_FORWARD_TO) for every app, else the
    /// `forwardTo` of each configured app and environment (`--app` and `--environment` choose), each once.
    private func webhooks() throws -> [ForwardingURL] {
        if let url = try ForwardingOptions.target(forwardTo) { return [url] }
        var urls: [ForwardingURL] = []
        for target in try app.storedScope().targets ?? [] {
            guard let forwardTo = target.forwardTo, let url = try ForwardingOptions.target(forwardTo) else { continue }
            if !urls.contains(where: { $0.target.id == url.target.id }) { urls.append(url) }
        }
        guard !urls.isEmpty else {
            throw ReconcilerError.configuration(
                "forward needs the app's webhook URL: --forward-to or RECONCILER_FORWARD_TO, or forwardTo in the configuration file "
                    + "(the queue keeps only an id of it, never the URL)")
        }
        return urls
    }
}
