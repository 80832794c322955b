import AppStoreServer
import ArgumentParser
import CoreMetrics
import Forwarder
import Foundation
import Logging
import Reconciler
import ReconcilerDomain
import ReconcilerMetrics
import ReconcilerShared
import ReconcilerStore

struct RepairCommand: AsyncParsableCommand, UsesAppsOptions {
    static let configuration = CommandConfiguration(
        commandName: "repair",
        abstract: "Repair one customer from a support ticket: by order ID, transaction ID or app account token.",
        discussion: """
            Finds the customer (Look Up Order ID for --order-id; any transaction or original transaction ID of \
            theirs; or the purchases stored for the app's user ID), replays every notification of that customer \
            in Apple's history (Get Notification History with the transactionId filter, over Apple's retention or \
            from --since) through the same verified handler as the webhook, then reads their transaction history \
            from the stored revision (--full: from the start) and their subscription statuses. Prints the \
            customer's purchases before → after, the notifications the webhook had missed, what the transaction \
            history changed and the statuses Apple reports.

            It holds no run lease and waits for none: it runs beside a scheduled run and `work` processes, in \
            short transactions, sharing the app's request budget. It is recorded like a run (kind repair, in \
            `status`), its changes go to the change feed, and with the app's forwardTo (or --forward-to, \
            RECONCILER_FORWARD_TO) the notifications it recorded that Apple had not delivered are forwarded to the \
            app's webhook, signed with its secret.

            Exit codes: 0 repaired; 4 repaired, but something needs a person (payloads quarantined for the \
            first time, a request Apple refused), or the order's signed transactions failed verification \
            (quarantined, nothing applied); 2 partial or interrupted (run it again); 1 usage or configuration \
            error, a malformed ID, or a customer the App Store or the database does not know (nothing changed).

              reconciler repair --order-id MQ5Q7X2ZYB --dry-run
              reconciler repair --order-id MQ5Q7X2ZYB
              reconciler repair --transaction-id 2000000123456789 --full
              reconciler repair --app-account-token 7e3fb20b-4cdb-47cc-936d-99d65f608138 \\
                  --json
            """)

    @Option(help: ArgumentHelp("The order ID on the customer's receipt email from Apple.", valueName: "id")) var orderId: String?
    @Option(help: ArgumentHelp("Any transaction or original transaction ID of the customer.", valueName: "id")) var transactionId: String?
    @Option(help: ArgumentHelp("The app's user ID (appAccountToken) of a customer whose purchases are stored.", valueName: "uuid"))
    var appAccountToken: String?
    @Option(
        help: ArgumentHelp(
            "The app's own ID for a customer (appUserId) that `reconciler import` gave: repairs that user's stored purchases.",
            valueName: "id"))
    var appUserId: String?
    @Option(
        help: ArgumentHelp(
            "Read the customer's notification history from T (ISO 8601 with a zone, UNIX ms, now-30d; default: as far back as Apple keeps it, 180 days; 30 in the sandbox).",
            valueName: "T"), transform: Timestamp.argument)
    var since: Timestamp?
    @Flag(help: "Read the customer's transaction history from the start, not from the stored revision.") var full = false
    @Flag(help: "Change nothing; print exactly what the repair would do.") var dryRun = false
    @Flag(help: "Print the report as JSON.") var json = false
    @Option(
        help: ArgumentHelp(
            """
            Deliver each notification the repair records that Apple did not deliver to this webhook (env RECONCILER_FORWARD_TO); without it, to the app's forwardTo (never both).
            """, valueName: "url"))
    var forwardTo: String?
    @Option(
        help: ArgumentHelp(
            "How long to wait at the end for those deliveries; `reconciler forward` delivers the rest.",
            valueName: "duration"))
    var forwardDrainTimeout: Duration = .seconds(60)
    @Option(
        help: ArgumentHelp(
            """
            Write the repair's exit code, end and status (reconciler_run_*{kind="repair"}, node_exporter textfile format) to this file; \
            give it a file of its own beside the scheduled run's.
            """, valueName: "path"))
    var metricsFile: String?

    @OptionGroup var options: AppleOptions
    @OptionGroup(title: "Forwarding") var forwarding: ForwardingOptions

    func validate() throws {
        let selectors = [orderId, transactionId, appAccountToken, appUserId].compactMap { $0 }.count
        guard selectors == 1 else {
            throw ValidationError(
                "give exactly one of --order-id, --transaction-id, --app-account-token or --app-user-id"
                    + (selectors > 1 ? " (\(selectors) were given)" : ""))
        }
        try MetricsFile.validate(metricsFile)
    }

    func run() async throws {
        let logger = logging.makeLogger()
        let metrics = MetricsFile(metricsFile, app: app)
        let report = try await metrics.recordingFailure(logger: logger) { registry, exitCode in
            RunMetrics.recordOutcome(exitCode: exitCode, kind: .repair, status: nil, in: registry)
        } work: {
            try await repair(logger: logger)
        }
        print(json ? String(decoding: try report.json(), as: UTF8.self) : report.humanSummary())
        if let metrics {
            RunMetrics.recordOutcome(exitCode: report.ending?.exitCode ?? 0, kind: .repair, status: report.status, in: metrics.registry)
            try metrics.write()
        }
        if let ending = report.ending { throw ending }
    }

    /// Runs the repair with the shared request budget, then delivers what it queued for the app's webhook.
    private func repair(logger: Logger) async throws -> RepairReport {
        let selector: CustomerRepair.Selector
        do {
            selector = try CustomerRepair.Selector.parse(
                orderId: orderId, transactionId: transactionId, appAccountToken: appAccountToken, appUserId: appUserId)
        }
        // One app; where it is configured in both environments, production first, then the sandbox
        // when Apple knows the customer in production under none of the IDs given (TestFlight and
        // App Review purchases are sandbox purchases).
        let loaded = try app.loadTargets(api: api)
        let targets = loaded.targets.productionFirst()
        guard Set(targets.map(\.app.bundleId)).count == 1 else {
            throw ReconcilerError.configuration(
                "several apps are configured (\(Set(targets.map(\.app.bundleId)).sorted().joined(separator: ", "))): choose one with --app")
        }
        // The app's webhook (its forwardTo, or --forward-to), signed with its secret: checked before anything starts.
        let forwardingPlan = try self.forwarding.plan(
            forwardTo: forwardTo, configuration: loaded.configuration, targets: targets.map(\.configuration))
        let plans = try targets.map { target in
            let webhooks = forwardingPlan.webhooks(for: target.app)
            return (
                repair: CustomerRepair.Configuration(
                    selector: selector, since: since, fullHistory: full, dryRun: dryRun, forwardRoutes: webhooks.map(\.route)),
                forwarder: try dryRun ? [] : webhooks.map { try self.forwarding.configuration(for: $0) }
            )
        }
        for (index, target) in targets.enumerated().dropLast() {
            do {
                return try await repair(
                    configuration: plans[index].repair, forwarding: plans[index].forwarder, drainTimeout: forwardDrainTimeout, target: target,
                    logger: logger)
            } catch let error as ReconcilerError where [.unknownTransactionId, .unknownOrderId].contains(error.code) {
                logger.info("not found in \(target.app.environment.rawValue); trying \(targets[index + 1].app.environment.rawValue)")
            }
        }
        let last = targets.count - 1
        return try await repair(
            configuration: plans[last].repair, forwarding: plans[last].forwarder, drainTimeout: forwardDrainTimeout, target: targets[last],
            logger: logger)
    }

    private func repair(
        configuration: CustomerRepair.Configuration, forwarding: [Forwarder.Configuration], drainTimeout: Duration, target: CommandTarget,
        logger: Logger
    ) async throws -> RepairReport {
        let (verifier, client) = (target.verifier, target.client)
        let sharing = [
            target.sharing(
                [.getNotificationHistory, .getTransactionHistory, .getAllSubscriptionStatuses] + (orderId == nil ? [] : [.lookUpOrderId]))
        ]
        let interrupted = ReconcilerError(.interrupted, "interrupted: run the same command again (what is done is not done twice)")
        return try await target.callingApple {
            try await database.runWork(logger: logger, sharing: sharing, interrupted: interrupted) { database in
                var report = try await CustomerRepair(
                    configuration: configuration, scope: target.scope, database: database, verifier: verifier, client: client
                ).repair()
                // Each webhook's deliveries in turn; the last summary is of the repair's deliveries to them all.
                for configuration in forwarding {
                    let forwarder = Forwarder(configuration: configuration, database: database)
                    report.forwarding = try await forwarder.drain(runIds: [report.runId], upTo: drainTimeout)
                }
                return report
            }
        }
    }
}
