import AppStoreServer
import ArgumentParser
import Foundation
import Logging
import MockAppStore
import ReconcilerShared
import ServiceLifecycle
import Synchronization
import UnixSignals

/// `mock-appstore [simulate]`: the App Store imitation (the default subcommand).
struct MockAppStoreCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simulate",
        abstract: "A local App Store imitation: simulated customers, signed notifications, Apple's API semantics and faults.",
        discussion: """
            It simulates --customers customers of one app over --span up to now and signs everything with its own \
            CA (Apple's OIDs). It listens at once and writes --credentials-dir, then, as soon as --webhook accepts \
            connections, delivers the notifications outside the outage to it (Apple's retry schedule in \
            production) and prints "ready". It serves Get Notification History, Get Transaction History v2, Get All \
            Subscription Statuses, Look Up Order ID and the test-notification endpoints.

            --credentials-dir receives root.pem, a .p8 key the mock accepts, reconciler.env with the APP_STORE_* \
            variables that point a reconciler at it (the first app in its first environment) and reconciler.yaml, a \
            configuration file for `reconciler --config` naming every app and environment. GET /mock/truth returns \
            the final state of every purchase in the shape of `reconciler export`; GET /mock/orders every \
            transaction's order ID (also printed by --print-orders); GET /mock/stats what the mock saw.

            Several apps, as Apple serves them: --app BUNDLE_ID:APPLE_ID:ENVIRONMENTS (repeatable) replaces \
            --bundle-id, --app-apple-id and --environment. Each app in each environment is a world of its own: \
            --customers customers (the first app's first environment keeps --seed; the others' seeds come from \
            --seed, the app's index and the environment), its own block of transaction IDs (one block for all with \
            --shared-transaction-ids), its own rate limits (--rate-limit applies per app and environment). One team \
            key serves every app; the JWT's bid routes each request, and a transaction or order ID of another app \
            gets Apple's 4040010 (status 1 for an order) and counts as crossAppRequests in /mock/stats. Production \
            answers on --port, the sandbox on --sandbox-port ("sandbox listening on ..."): 30 days of history, one \
            delivery attempt, a tenth of production's rate limits. Every app's notifications go to the one --webhook. \
            --unauthorized-app answers 401 to an app's requests, as a key that does not cover it. --forged payloads \
            go to the first app's first environment only.

            --scale-notifications N (for benchmarks) replaces --customers with customers whose whole lives fall \
            inside the outage window, mostly renewals with every urgent kind among them, until the window holds at \
            least N notifications; each customer is rebuilt from the seed when a request needs it, so a million \
            notifications fit in a few hundred MB. The whole window is an outage: no live delivery, no --webhook.

            Times: ISO 8601 with a zone, UNIX milliseconds, or now-6h. Durations: 90s, 45m, 6h, 3d.

              mock-appstore --port 8081 --seed 7 --customers 200 \\
                --outage-start now-6h --outage-end now-3h \\
                --webhook http://127.0.0.1:8080/notifications --credentials-dir /tmp/mock

              # then: reconciler --config /tmp/mock/reconciler.yaml ...
              mock-appstore --port 8081 --sandbox-port 8082 \\
                --app com.example.one:1234567890:production,sandbox \\
                --app com.example.two:2345678901:production \\
                --webhook http://127.0.0.1:8080/notifications --credentials-dir /tmp/mock
            """)

    @Option(help: "Port to listen on (0 picks a free one, printed when ready).") var port: Int = 8081
    @Option(help: "Address to listen on.") var host: String = "127.0.0.1"
    @Option(help: "Scenario seed: the same seed gives the same customers and events.") var seed: UInt64 = 1
    @Option(help: "Number of simulated customers.") var customers: Int = 100
    @Option(help: "Scale mode: simulate customers until the outage window holds at least this many notifications (see below).")
    var scaleNotifications: Int?
    @Option(help: "How far back the simulated history reaches.") var span: String = "3d"
    @Option(help: "The scenario's present (default: now).") var now: String?
    @Option(help: "Start of the webhook outage (default now-6h).") var outageStart: String?
    @Option(help: "End of the webhook outage (default now-3h).") var outageEnd: String?
    @Flag(help: "Simulate no outage at all.") var noOutage = false
    @Option(help: ArgumentHelp("Another outage, START/END (repeatable), e.g. now-30h/now-28h.", valueName: "window"))
    var outage: [String] = []
    @Option(help: "Length of a \"monthly\" period (accelerated like the sandbox).") var renewalPeriod: String = "8h"
    @Option(help: "production or sandbox (default production; without --app).") var environment: String?
    @Option(help: "The app's bundle id (default com.example.reconciler.mock; without --app).") var bundleId: String?
    @Option(help: "The app's Apple ID (default 1234567890; without --app).") var appAppleId: Int64?
    @Option(
        name: .customLong("app"),
        help: ArgumentHelp(
            "An app and the environments to simulate for it (repeatable), e.g. com.example.one:1234567890:production,sandbox.",
            valueName: "bundle-id:apple-id:environments"))
    var apps: [String] = []
    @Option(help: "Port of the sandbox's API, with an --app in the sandbox (default: --port + 1, or a free one with --port 0).")
    var sandboxPort: Int?
    @Flag(help: "Every app and environment uses the same transaction IDs (Apple's are unique): purchases must be keyed by app and environment.")
    var sharedTransactionIds = false
    @Option(
        help: ArgumentHelp("Answer 401 to requests whose JWT names this app, as a key that does not cover it (repeatable).", valueName: "bundle-id"))
    var unauthorizedApp: [String] = []
    @Flag(help: "Sign with certificates as large as Apple's (each JWS header about 4.4 KB, as in Apple's real values), to measure storage.")
    var appleSizedCertificates = false
    @Option(help: "Where to deliver live notifications (POST {\"signedPayload\": ...}).") var webhook: String?
    @Option(help: "Directory that receives root.pem, the .p8 key and reconciler.env.") var credentialsDir: String?
    @Option(help: "Seconds to wait for the webhook to accept connections before delivering.") var webhookWait: Int = 120
    @Option(help: "Seconds one live POST to the webhook may take before it counts as timed out.") var deliveryTimeout: Int = 10
    @Option(
        help: """
            Requests per second per endpoint, per app and environment, before 429 (default: Apple's, 50 or 5 in the sandbox; Look Up Order ID never above Apple's 10 or 1).
            """)
    var rateLimit: Double?
    @Option(help: "Pagination token lifetime in seconds.") var tokenTtl: Int = 600
    @Option(help: "Entries per page of both histories (Apple sends up to 20; fewer makes a small scenario page more).") var pageSize: Int = 20
    @Option(
        help: ArgumentHelp(
            """
            The date Get Notification History selects windows on and orders pages by (Apple documents neither): \
            first-send-attempt (sent 0.1 to 2 s after signing) or signed-date (sent 0 to 2 s after signing, seeded).
            """, valueName: "date"))
    var historyDate: String = ScenarioConfiguration.HistoryDate.firstSendAttempt.rawValue
    @Option(help: "Latency added to every API response, ms.") var latencyMs: Int = 0
    @Option(help: "Random extra latency up to this, ms.") var latencyJitterMs: Int = 0
    @Option(name: .customLong("fault-5xx"), help: "Fraction of API requests answered 500 (retryable).") var fault5xx: Double = 0
    @Option(name: .customLong("fault-429"), help: "Fraction of API requests answered 429 with Retry-After.") var fault429: Double = 0
    @Option(name: .customLong("fault-429-retry-after"), help: "How many seconds ahead the Retry-After of --fault-429's 429s is (0: 0.2 to 1 s).")
    var fault429RetryAfter: Int = 0
    @Option(help: "The form of every 429's Retry-After: unix-ms (Apple's), delta-seconds or http-date (as proxies may send).")
    var retryAfterFormat: String = FaultConfiguration.RetryAfterFormat.unixMilliseconds.rawValue
    @Option(help: "Fraction of API requests whose connection is dropped without an answer.") var faultDrop: Double = 0
    @Option(help: "Fraction of successful API responses cut in half.") var faultTruncate: Double = 0
    @Option(help: "Fraction of paginated history requests answered PaginationTokenExpired.") var faultExpireTokens: Double = 0
    @Flag(help: "Include no scripted customers inside the outage (only random ones).") var noScriptedCustomers = false
    @Option(
        help:
            "Slip this many notifications signed by a stranger's CA into the history, inside the outage; Look Up Order ID answers FORGED0000, FORGED0001... with their transactions."
    ) var forged: Int = 0
    @Option(
        help:
            "Add this many customers whose last activity is older than the notification history's retention (annual subscriptions, lifetime unlocks, expired ones); GET /mock/identifiers lists them for `reconciler import`."
    ) var dormantCustomers: Int = 0
    @Option(help: "Write the ground truth (JSON lines) to this file before serving.") var truthFile: String?
    @Flag(help: "Print every transaction's order ID (JSON lines: orderId, transactionId, originalTransactionId, account...) once listening.")
    var printOrders = false
    @Option(help: "Log level.") var logLevel: String = "info"

    func validate() throws {
        for (name, value) in [
            ("--fault-5xx", fault5xx), ("--fault-429", fault429), ("--fault-drop", faultDrop),
            ("--fault-truncate", faultTruncate), ("--fault-expire-tokens", faultExpireTokens),
        ] {
            guard (0...1).contains(value) else { throw ValidationError("\(name) must be a fraction between 0 and 1") }
        }
        guard fault429RetryAfter >= 0 else { throw ValidationError("--fault-429-retry-after must not be negative") }
        guard FaultConfiguration.RetryAfterFormat(rawValue: retryAfterFormat) != nil else {
            let forms = FaultConfiguration.RetryAfterFormat.allCases.map(\.rawValue).joined(separator: ", ")
            throw ValidationError("--retry-after-format is one of \(forms)")
        }
        guard customers >= 0 else { throw ValidationError("--customers must not be negative") }
        guard dormantCustomers >= 0 else { throw ValidationError("--dormant-customers must not be negative") }
        if let scaleNotifications {
            guard scaleNotifications > 0 else { throw ValidationError("--scale-notifications must be positive") }
            guard !noOutage else { throw ValidationError("--scale-notifications needs an outage: its notifications all fall inside it") }
            guard webhook == nil else { throw ValidationError("--scale-notifications delivers nothing live: omit --webhook") }
            guard forged == 0, outage.isEmpty else { throw ValidationError("--scale-notifications takes no --forged and no --outage") }
        }
        if let environment, !["production", "sandbox"].contains(environment.lowercased()) {
            throw ValidationError("--environment is production or sandbox")
        }
        if !apps.isEmpty {
            guard environment == nil, bundleId == nil, appAppleId == nil else {
                throw ValidationError(
                    "--app names each app's bundle ID, Apple ID and environments: omit --bundle-id, --app-apple-id and --environment")
            }
            do {
                _ = try apps.map(MockAppStore.App.init(parsing:))
            } catch let error as MockAppStore.ConfigurationError {
                throw ValidationError(error.description)
            }
        } else if sandboxPort != nil || sharedTransactionIds {
            throw ValidationError("--sandbox-port and --shared-transaction-ids go with --app")
        }
        guard ScenarioConfiguration.HistoryDate(rawValue: historyDate) != nil else {
            let dates = ScenarioConfiguration.HistoryDate.allCases.map(\.rawValue).joined(separator: " or ")
            throw ValidationError("--history-date is \(dates)")
        }
    }

    func run() async throws {
        LoggingSystem.bootstrap { StreamLogHandler.standardError(label: $0) }
        var logger = Logger(label: "mock-appstore")
        logger.logLevel = Logger.Level(rawValue: logLevel) ?? .info
        let nowMilliseconds = Timestamp.now.millisecondsSince1970
        func time(_ text: String, _ flag: String) throws -> Int64 {
            do {
                return try Timestamp.parse(text, now: Timestamp(millisecondsSince1970: nowMilliseconds)).millisecondsSince1970
            } catch {
                throw ValidationError("\(flag): \(error)")
            }
        }
        let present = try now.map { try time($0, "--now") } ?? nowMilliseconds
        guard let spanMilliseconds = Duration(parsing: span)?.milliseconds, spanMilliseconds > 0 else {
            throw ValidationError("--span: \(span) is not a duration")
        }
        guard let period = Duration(parsing: renewalPeriod)?.milliseconds, period >= 60_000 else {
            throw ValidationError("--renewal-period: \(renewalPeriod) is not a duration of at least 1m")
        }
        var outage: (Int64, Int64)?
        if !noOutage {
            let start = try time(outageStart ?? "now-6h", "--outage-start")
            let end = try time(outageEnd ?? "now-3h", "--outage-end")
            guard start < end else { throw ValidationError("--outage-start must be before --outage-end") }
            guard end <= present else { throw ValidationError("--outage-end must not be after the scenario's present (--now)") }
            outage = (start, end)
        }
        var faults = FaultConfiguration()
        faults.latencyMilliseconds = latencyMs
        faults.latencyJitterMilliseconds = latencyJitterMs
        faults.serverErrorRate = fault5xx
        faults.rateLimitedRate = fault429
        faults.rateLimitedRetryAfterSeconds = fault429RetryAfter
        faults.retryAfterFormat = FaultConfiguration.RetryAfterFormat(rawValue: retryAfterFormat) ?? .unixMilliseconds
        faults.dropRate = faultDrop
        faults.truncateRate = faultTruncate
        faults.expiredTokenRate = faultExpireTokens
        var scenario = ScenarioConfiguration(
            seed: seed, customers: customers, now: present, span: spanMilliseconds, outageStart: outage?.0, outageEnd: outage?.1,
            environment: environment?.lowercased() == "sandbox" ? .sandbox : .production, bundleId: bundleId ?? "com.example.reconciler.mock",
            appAppleId: appAppleId ?? 1_234_567_890, renewalPeriod: period, scriptedOutageCustomers: !noScriptedCustomers,
            forgedNotifications: forged)
        scenario.scaleNotifications = scaleNotifications
        scenario.dormantCustomers = dormantCustomers
        scenario.historyDate = ScenarioConfiguration.HistoryDate(rawValue: historyDate) ?? .firstSendAttempt
        for window in self.outage {
            let parts = window.split(separator: "/", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { throw ValidationError("--outage: \(window) is not START/END") }
            let (start, end) = (try time(parts[0], "--outage"), try time(parts[1], "--outage"))
            guard start < end, end <= present else { throw ValidationError("--outage: \(window) must start before it ends, and end by now") }
            scenario.additionalOutages.append(start...end)
        }
        let host = self.host
        let printOrders = self.printOrders
        // Known once the scenario is signed, printed once the mock listens.
        let orders = OrderLines()
        let servedApps = try apps.map(MockAppStore.App.init(parsing:))
        let configuration = MockAppStore.Configuration(
            scenario: scenario, host: host, port: port, webhookURL: webhook, credentialsDirectory: credentialsDir, faults: faults,
            rateLimitPerSecond: rateLimit, paginationTokenLifetime: .seconds(tokenTtl), pageSize: pageSize,
            webhookWait: .seconds(webhookWait), deliveryTimeout: .seconds(deliveryTimeout), apps: servedApps,
            sandboxPort: sandboxPort ?? (port == 0 ? 0 : port + 1),
            sharedTransactionIds: sharedTransactionIds, unauthorizedApps: Set(unauthorizedApp), appleSizedCertificates: appleSizedCertificates,
            onListening: { port in
                FileHandle.standardOutput.write(Data("mock-appstore listening on http://\(host):\(port)\n".utf8))
                if printOrders, let lines = orders.lines.withLock({ $0 }) {
                    FileHandle.standardOutput.write(Data(lines.utf8))
                }
            },
            onSandboxListening: { port in
                FileHandle.standardOutput.write(Data("mock-appstore sandbox listening on http://\(host):\(port)\n".utf8))
            },
            onReady: { _ in
                FileHandle.standardOutput.write(Data("mock-appstore ready: live delivery complete\n".utf8))
            })
        let mock: MockAppStore
        do {
            mock = try await MockAppStore.make(configuration: configuration, logger: logger)
        } catch let error as MockAppStore.ConfigurationError {
            throw ValidationError(error.description)
        }
        if printOrders {
            let lines = try mock.ordersJSONLines()
            orders.lines.withLock { $0 = lines }
        }
        if let truthFile {
            try mock.truthJSONLines().write(toFile: truthFile, atomically: true, encoding: .utf8)
        }
        if let outage {
            logger.info(
                "outage",
                metadata: ["window": "\(TimeWindow(start: .init(millisecondsSince1970: outage.0), end: .init(millisecondsSince1970: outage.1)))"])
        }
        let group = ServiceGroup(
            configuration: .init(
                services: [.init(service: mock)], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
    }
}

/// The order lines `--print-orders` prints, handed from start-up to the listening callback.
private final class OrderLines: Sendable {
    let lines = Mutex<String?>(nil)
}
