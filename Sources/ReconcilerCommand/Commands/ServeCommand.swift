import AppStoreServer
import ArgumentParser
import CoreMetrics
import Forwarder
import Foundation
import Hummingbird
import Logging
import Reconciler
import ReconcilerConfiguration
import ReconcilerDomain
import ReconcilerMetrics
import ReconcilerShared
import ReconcilerStore
import ServiceLifecycle
import WebhookServer

struct ServeCommand: AsyncParsableCommand, UsesAppsOptions {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Receive App Store Server Notifications V2 on POST /notifications, for every configured app and environment.",
        discussion: """
            Every notification goes through the same verified handler a reconcile run uses: its signature and chain \
            are verified, then the app and environment it names (and in production its app Apple ID) choose the \
            configured app it is stored under; one URL serves every app and both environments (Apple sends sandbox \
            notifications to the production URL unless a sandbox URL is set). \
            Responses: 200 stored (also for a duplicate); 200 quarantined for an authentic notification \
            (signature and chain verified) this release cannot decode (INVALID_PAYLOAD, MISSING_SIGNED_DATE): its exact \
            bytes are kept, counted in reconciler_webhook_quarantined_total, and `reconciler rejections --retry` applies \
            it after an upgrade; 400 rejected with its reason (nothing is written; forgeries always); 503 APP_NOT_CONFIGURED for an authentic notification of an app or environment the \
            configuration does not name (not stored: Apple delivers it again once it does; only an app the \
            deployment knows, configured in another environment or listed in knownApps, counts as a configuration gap \
            that pages); 400 NOTIFICATION_TOO_OLD for such a notification signed more than 7 days ago (not Apple's \
            delivery: a copy posted again); 413 body too large; \
            503 database unavailable (Apple retries). \
            GET /health answers 200 when the database is reachable; GET /metrics serves Prometheus text: the \
            webhook's counters, the newest live notification's time, and gauges read from the database every \
            --metrics-interval (unacknowledged quarantined payloads, the last finished run). \
            SIGTERM or SIGINT shuts down gracefully.

            With each app's forwardTo in the configuration file (or --forward-to, for every app), every notification \
            stored for the first time is also delivered to the app's own webhook (Apple's exact body, from a durable \
            queue, retried with backoff, signed with the webhook's secret), so the app's handler sees what Apple sent; \
            deliveries that a run queued are delivered too.

              reconciler serve --port 8080
              reconciler serve --port 8080 \\
                  --forward-to https://app.internal/apple/notifications \\
                  --forward-secret-file /run/secrets/hook
            """)

    @OptionGroup var options: StoredDataOptions

    @Option(name: .long, help: "Port to listen on (env PORT, default 8080).")
    var port: Int?

    @Option(name: .long, help: "Address to listen on.")
    var host: String = "0.0.0.0"

    @Option(name: .long, help: ArgumentHelp("Largest request body accepted, in bytes.", valueName: "bytes"))
    var maxBodyBytes: Int = 256 * 1024

    @Flag(name: .long, help: "Apply pending migrations before serving.")
    var migrate = false

    @Option(name: .long, help: ArgumentHelp("How often GET /metrics's gauges are read from the database.", valueName: "duration"))
    var metricsInterval: Duration = .seconds(60)

    @Option(
        name: .long,
        help: ArgumentHelp(
            "How often serve's leader (one replica, by a lease) writes the change feed's time rows: entitlement ended by a passing moment.",
            valueName: "duration"))
    var leaderInterval: Duration = .seconds(60)

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Also deliver every app's notifications stored for the first time to this webhook (env RECONCILER_FORWARD_TO); refused beside a forwardTo in the configuration file.",
            valueName: "url"))
    var forwardTo: String?

    @OptionGroup(title: "Forwarding") var forwarding: ForwardingOptions

    func run() async throws {
        let logger = logging.makeLogger()
        let (configuration, targets, verifiers) = try app.verifyingTargets()
        // Where each app forwards, checked before anything starts (``ForwardingOptions/plan(forwardTo:configuration:targets:)``).
        let forwardingPlan = try forwarding.plan(forwardTo: forwardTo, configuration: configuration, targets: targets)
        let forwarderConfigurations = try forwarding.configurations(for: forwardingPlan)
        let settings = try database.settings()
        let port =
            try self.port ?? Env.value("PORT").map { value in
                guard let port = Int(value) else { throw ReconcilerError.configuration("PORT must be a number") }
                return port
            } ?? 8080
        // The app API's tokens are read before anything starts: a file that is missing or lists no token ends serve at once.
        let appAPITokens = try configuration.appApi.map { settings in
            guard settings.port != port else {
                throw ReconcilerError.configuration(
                    "appApi.port \(settings.port) is the webhook's port: the app API needs a port of its own (it is not Apple's URL)")
            }
            return try AppAPITokens(path: settings.tokenFile, logger: logger)
        }
        guard metricsInterval >= .seconds(1) else {
            throw ReconcilerError.configuration("--metrics-interval: \(metricsInterval.operatorText) is shorter than 1s")
        }
        guard leaderInterval >= .seconds(1) else {
            throw ReconcilerError.configuration("--leader-interval: \(leaderInterval.operatorText) is shorter than 1s")
        }
        // A database serve cannot use as configured (a name that does not resolve, a refused password,
        // TLS) ends it at once, in one line. One that is away (refused, no answer: a restart, a
        // failover) is said in one line after --database-timeout, and serve listens anyway: Apple's
        // deliveries get 503 and are retried, /health says 503, until the database is back. SIGTERM
        // while it waits ends it at once.
        var databaseAway = false
        do {
            guard try await untilSignalled({ [database] in try await database.checkConnection(settings, logger: logger) }) != nil else {
                logger.info("stopped before connecting to the database")
                return
            }
        } catch let error as ReconcilerError where error.code == .databaseUnavailable {
            logger.error("\(error.description); serving anyway: notifications get 503 (Apple retries them) until it is back")
            databaseAway = true
        }
        // Apple waits only so long for an answer: a database that is away gets a quick 503 (Apple retries).
        let database = try self.database.database(settings, logger: logger, unavailableTimeout: min(.seconds(5), self.database.databaseTimeout))
        // One registry for the process: the webhook's counters, the ledger gauges, and any library's
        // swift-metrics; each app's series carry its labels (one app: every series, as before).
        let single = targets.count == 1 ? targets[0].app : nil
        let metrics = MetricsRegistry(bundleId: single?.bundleId, environment: single?.environment)
        MetricsSystem.bootstrap(metrics.factory)
        // Each app's notifications are queued for its own webhook (`forwardTo` in the file), or all for --forward-to.
        let forwardRoutes = Dictionary(
            targets.map { target in (target.app, forwardingPlan.webhooks(for: target.app).map(\.route)) }.filter { !$0.1.isEmpty },
            uniquingKeysWith: { first, _ in first })
        let ledgerMetrics = targets.map { target in
            LedgerMetrics(
                ledger: RunLedger(database: database), app: target.app,
                registry: metrics.scoped(target.app),
                configuration: .init(interval: metricsInterval), liveConsumptionRequests: target.consumption.liveRequests,
                forwardingTargets: (forwardRoutes[target.app] ?? []).map(\.target))
        }
        let handlers = zip(targets, verifiers).map { target, verifier in
            NotificationHandler(scope: target.scope, verifier: verifier, database: database)
        }
        let server = WebhookServer(
            configuration: .init(host: host, port: port, maximumBodySize: maxBodyBytes),
            router: try NotificationRouter(handlers: handlers, knownApps: configuration.knownBundleIds), forwarding: forwardRoutes,
            metrics: WebhookMetrics(registry: metrics), logger: logger)
        let migrate = self.migrate
        // The forwarders' own Database waits longer than the webhook's: their queue is durable. One per distinct URL.
        let forwarders = forwarderConfigurations.map {
            Forwarder(configuration: $0, database: database.with(unavailableTimeout: self.database.databaseTimeout))
        }
        // One App Store client and one budget lease per app, for the app API's refreshes and
        // consumption answers and the leader's automatic answers alike.
        let apple = try ServeAppleCallers(
            targets: targets, verifiers: verifiers, appAPI: configuration.appApi,
            database: database.with(unavailableTimeout: self.database.databaseTimeout), logger: logger)
        // One replica leads (a lease row): it writes the feed's time rows (the unique key keeps a
        // racing run's rows single) and sends the automatic consumption answers that fell due.
        let leader = ServeLeader(
            configuration: .init(interval: leaderInterval), writer: TimeRowWriter(scopes: targets.map(\.scope), database: database),
            consumption: apple.consumption, logger: logger)
        // The app API, when configured: its own port, a service of the same group (stopped before the database).
        var appAPI: [any Service] = []
        if let settings = configuration.appApi, let appAPITokens {
            let server = AppAPIServer(
                configuration: .init(host: host, port: settings.port), tokens: appAPITokens, handlers: handlers, refreshers: apple.refreshers,
                database: database, metrics: metrics, logger: logger)
            appAPI.append(
                server.makeApplication { boundPort in
                    logger.info("app API listening", metadata: ["port": "\(boundPort)", "tokenFile": "\(settings.tokenFile)"])
                })
        }
        // Stopped in reverse order: the budget leases are left once the app API and the leader stopped, before the database.
        let services: [any Service] = [database, ServeAppleCallers.Leaving(leases: apple.leases)] + ledgerMetrics + forwarders + [leader] + appAPI
        let migrator = Migrator(defaultBundleId: Set(targets.map(\.app.bundleId)).count == 1 ? targets.first?.app.bundleId : nil)
        // The schema is checked (or migrated) once the database client runs and before the port
        // opens, so a serve that answers is one whose schema matches. A database that went away
        // since the connection check is no reason not to listen (/health says 503 until it is
        // back): that only warns. SIGTERM while it waits for the database ends serve at once.
        let prepareSchema: @Sendable () async throws -> Void = { [databaseAway] in
            // Away at the connection check: the schema check would only wait for the pool to give up.
            guard !databaseAway else { return }
            try await cancelWhenGracefulShutdown {
                logger.info("checking the database schema before opening the port")
                do {
                    if migrate {
                        try await migrator.migrate(database)
                    } else {
                        try await migrator.requireCurrent(database)
                    }
                } catch  where Task.isCancelled {
                    // SIGTERM while waiting for the database: whatever the wait threw, it was the signal.
                    logger.info("stopped before the schema check finished")
                } catch let error where Database.isDatabaseFailure(error) {
                    logger.warning(
                        "database unreachable at startup; /health reports it", metadata: ["error": "\(Database.operatorDescription(of: error))"])
                }
            }
        }
        let application = server.makeApplication(
            services: services,
            onServerRunning: { boundPort in
                logger.info(
                    "listening",
                    metadata: [
                        "port": "\(boundPort)", "apps": "\(targets.map(\.app.description).joined(separator: ", "))", "database": "\(settings)",
                        "forwardTo": "\(Set(forwardRoutes.values.flatMap { $0.map(\.target.redacted) }).sorted().joined(separator: ", "))",
                    ])
            },
            beforeServerStarts: prepareSchema)
        try await application.runService()
    }
}
