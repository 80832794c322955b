import ArgumentParser
import Forwarder
import Foundation
import Logging
import Reconciler
import ReconcilerConfiguration
import ReconcilerDomain
import ReconcilerShared
import ReconcilerStore

struct ForwardCommand: AsyncParsableCommand, UsesAppsOptions {
    static let configuration = CommandConfiguration(
        commandName: "forward",
        abstract: "Deliver the queued notifications to the app's own webhook: a long-running worker, or --once.",
        discussion: """
            `run`, `repair` and `serve` queue notifications for the app's webhook in the transaction that records \
            them; this worker delivers what they left (a run waits only --forward-drain-timeout). The queue keeps no \
            URL (only an id of it and its redacted form, since a URL may carry credentials): give the worker the same \
            configuration (each app's forwardTo, or --forward-to or RECONCILER_FORWARD_TO), and it delivers the \
            deliveries queued for those URLs, signed with each webhook's secret; deliveries queued for another URL \
            wait for a worker given that one (it names them in its log). Several workers may share the queue: a delivery is never in flight from two at \
            once. A delivery the app answered 2xx is never sent again; a worker killed between sending and \
            recording the answer leaves that one delivery to be sent again (at-least-once, like Apple: the app \
            dedups by notificationUUID).

            With a configuration file (--config, RECONCILER_CONFIG) and no --forward-to, it delivers to each \
            configured app's forwardTo at once (each URL once; --app and --environment choose the apps); \
            --forward-to sends to one URL whatever the app, and is refused beside a forwardTo in the file. A URL \
            delivers every delivery queued for it, of whichever app.

            Without --once it runs until SIGTERM or SIGINT. With --once it makes one pass over the deliveries due: \
            each is sent once and its answer recorded (a failure with its backoff, as the worker would), whether \
            or not the app's endpoint answers; with --drain-timeout it also waits for retries, up to that long. \
            Then it prints where the queue stands and exits: 0 nothing left pending for its URL; 2 deliveries \
            still pending (retrying: the worker, the next run or the next --once sends them when their backoff \
            ends); 4 deliveries failed for good during this invocation (after --forward-attempts tries: fix the \
            app's endpoint, then --retry-failed; or at once, never sent, when a delivery's stored signed payload \
            cannot be rebuilt: the runbook says what to do); 1 no URL given, or a webhook without a secret that \
            is not marked unsigned, or --forward-to beside a forwardTo.

              reconciler forward --forward-to https://app.internal/apple/notifications \\
                  --forward-secret-file /run/secrets/hook
              # one pass over what is due, then exit
              reconciler forward --once
              # and wait for retries, up to 10 minutes
              reconciler forward --once --drain-timeout 10m
              reconciler forward --once --retry-failed
              # that app's forwardTo
              reconciler forward --config /etc/reconciler/reconciler.yaml \\
                  --app com.example.two

            With --redeliver it sends again what the app's handler acknowledged and dropped: it queues again, \
            as new deliveries, the stored notifications this reconciler first received between --since and \
            --until (as `run --start` reads times), of the configured apps (--app, --environment), delivered or \
            not, for each of the app's forwardTo targets that takes their type (--target NAME: only the target \
            of that name); each is sent with the header Reconciler-Redelivery: 1 by the worker or the next \
            `forward --once`, after the first deliveries due. --type TYPE (every subtype) or TYPE/SUBTYPE, \
            repeatable, takes only those. A notification whose stored payload was pruned or does not rebuild is \
            counted and listed, not sent; --dry-run counts the same and queues nothing. Exit 0, or 1 for usage.

              reconciler forward --config /etc/reconciler/reconciler.yaml --redeliver \\
                  --since 2026-11-20T03:10:00Z --until 2026-11-20T05:45:00Z \\
                  --target staging --dry-run
            """)

    @Flag(help: "Send each delivery that is due once, record its answer, then exit.") var once = false
    @Option(help: ArgumentHelp("With --once, also wait for retries, up to this long (default: no wait).", valueName: "duration"))
    var drainTimeout: Duration?
    @Flag(help: "First give the deliveries marked failed a new set of attempts (after the app's endpoint was fixed).") var retryFailed = false
    @Option(
        help: ArgumentHelp(
            "The app's own webhook (env RECONCILER_FORWARD_TO): the URL the deliveries were queued for, for every app; without it, each configured app's forwardTo (never both).",
            valueName: "url"))
    var forwardTo: String?

    @Flag(help: "Queue again the stored notifications first received between --since and --until (see below).") var redeliver = false
    @Option(
        help: ArgumentHelp("With --redeliver: the window's start (ISO 8601 with a zone, UNIX ms, or now-6h).", valueName: "time"),
        transform: Timestamp.argument)
    var since: Timestamp?
    @Option(help: ArgumentHelp("With --redeliver: the window's end (excluded).", valueName: "time"), transform: Timestamp.argument)
    var until: Timestamp?
    @Option(
        name: .customLong("type"),
        help: ArgumentHelp("With --redeliver: only this TYPE (every subtype) or TYPE/SUBTYPE; repeatable.", valueName: "type"))
    var types: [String] = []
    @Option(help: ArgumentHelp("With --redeliver: only the forwardTo target of this name.", valueName: "name")) var target: String?
    @Flag(help: "With --redeliver: count and list what it would queue; queue nothing.") var dryRun = false

    @OptionGroup var options: StoredDataOptions
    @OptionGroup(title: "Forwarding") var forwarding: ForwardingOptions

    func validate() throws {
        if drainTimeout != nil, !once { throw ValidationError("--drain-timeout goes with --once (the worker never stops to wait)") }
        try validateRedelivery()
    }

    func run() async throws {
        if redeliver { return try await redeliverWindow() }
        let logger = logging.makeLogger()
        let configurations = try forwarding.configurations(for: try plan())
        let (once, retryFailed, targets) = (self.once, self.retryFailed, configurations.map(\.url.target))
        // The worker finishes the delivery in flight on SIGTERM and ends as usual (exit 0); a pass
        // (--once) is cancelled by it, as other batch work is.
        let (before, after, others, pendingHere, unrebuildable) = try await database.runWork(logger: logger, stopsGracefully: !once) {
            database in
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
                        if once, let drainTimeout {
                            _ = try await forwarder.drain(runIds: nil, upTo: drainTimeout)
                        } else if once {
                            _ = try await forwarder.deliverOnePass()
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
                "  \(pending) pending for another webhook, \(target.redacted): `reconciler forward --once --forward-to <that URL>` with its secret delivers them"
            )
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
    /// `forwardTo` of each configured app and environment (`--app` and `--environment` choose), each
    /// once, by the rule of every forwarding command (``ForwardingOptions/plan(forwardTo:configuration:targets:)``).
    private func plan() throws -> ForwardingPlan {
        // Without a configuration file, only the process-wide URL (and no app needs naming).
        let configuration = try app.configurationFile.map { _ in try app.configuration(requireAppAppleId: false) }
        let plan = try forwarding.plan(
            forwardTo: forwardTo, configuration: configuration, targets: try configuration.map { try app.targets(in: $0) } ?? [])
        guard !plan.distinct.isEmpty else {
            throw ReconcilerError.configuration(
                "forward needs the app's webhook URL: --forward-to or RECONCILER_FORWARD_TO, or forwardTo in the configuration file "
                    + "(the queue keeps only an id of it, never the URL)")
        }
        return plan
    }
}
