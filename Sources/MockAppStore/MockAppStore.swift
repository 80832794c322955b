import AppStoreServer
package import Crypto
import Foundation
package import Logging
package import ReconcilerShared
import ServiceLifecycle
import Synchronization

/// A local App Store imitation for tests, demos and rehearsals: it simulates the customers of one
/// app or several (``ScenarioConfiguration``, ``Configuration/apps``), signs their notifications and
/// transactions with its own CA (carrying Apple's OIDs), delivers notifications to a webhook outside
/// the outage window, and serves Get Notification History, Get Transaction History, Get All
/// Subscription Statuses, Look Up Order ID and the test-notification endpoints with Apple's
/// documented semantics, faults on demand included.
///
/// ```swift
/// let mock = try await MockAppStore.make(configuration: .init(
///     scenario: .init(seed: 7, customers: 200, outageStart: start, outageEnd: end),
///     webhookURL: "http://127.0.0.1:8080/notifications", credentialsDirectory: "/tmp/mock"))
/// try await ServiceGroup(services: [mock], logger: logger).run()
/// ```
///
/// With ``Configuration/apps``, as Apple does: each app in each environment is a world of its own
/// (its customers, transaction IDs and rate limits), one team key serves every app and the JWT's
/// `bid` routes each request to its app, production answers on ``Configuration/port`` and the
/// sandbox on ``Configuration/sandboxPort``, and every notification goes to the one webhook.
///
/// `GET /mock/truth` returns the final state of every purchase in the shape of `reconciler export`;
/// `GET /mock/orders` every transaction's order ID.
package final class MockAppStore: Service, Sendable {
    package struct Configuration: Sendable {
        package var scenario: ScenarioConfiguration
        package var host: String
        /// 0 picks a free port; see ``onReady``.
        package var port: Int
        /// Where live notifications go (`nil`: deliveries outside the outage count as successful).
        package var webhookURL: String?
        /// Receives `root.pem`, the API key (`.p8`), `reconciler.env` (the first app in its first
        /// environment) and `reconciler.yaml` (every app and environment, for `reconciler --config`).
        package var credentialsDirectory: String?
        package var faults: FaultConfiguration
        /// Requests per second per endpoint, per app and environment, before 429 (`nil`: Apple's, 50
        /// in production, 5 in the sandbox). Look Up Order ID never allows more than Apple's 10 (1 in
        /// the sandbox), the test endpoints 1 (0.1).
        package var rateLimitPerSecond: Double?
        /// How long a pagination token stays valid.
        package var paginationTokenLifetime: Duration
        /// Entries per page of both histories: Apple sends up to 20; fewer makes tests page more.
        package var pageSize: Int
        package var keyId: String
        package var issuerId: String
        /// How long to wait for the webhook to accept connections before delivering.
        package var webhookWait: Duration
        /// How long one POST of the live delivery at start-up may take before it counts as timed
        /// out (and, in production, is retried later); other POSTs (test notifications) take 10 s. Tests under heavy load raise it: a POST the mock gave up on may still be
        /// stored by the webhook after "live delivery complete", after a test read the state.
        package var deliveryTimeout: Duration
        /// The apps to serve, each in its environments (empty: the scenario's one app, in its
        /// environment, on ``port``). The scenario's `bundleId`, `appAppleId` and `environment` then
        /// give way to each app's; everything else (seed, customers per world, outage, period) applies
        /// to every app and environment.
        package var apps: [App]
        /// Where the sandbox's API listens when ``apps`` name the sandbox (0 picks a free port).
        package var sandboxPort: Int
        /// Every app and environment draws its transaction IDs from the same block, so two apps have
        /// purchases with the same IDs (Apple's are unique; this proves a reconciler keys purchases by
        /// app and environment). `/mock/refund` then needs `bundleId` (and `environment`).
        package var sharedTransactionIds: Bool
        /// Apps whose requests are answered 401, as with a key that does not cover them.
        package var unauthorizedApps: Set<String>
        /// Sign with certificates as large as Apple's, so each JWS header is about 4.4 KB as Apple's
        /// are (``SigningCertificateAuthority/Options/appleSizedCertificates``).
        package var appleSizedCertificates: Bool
        /// Called with the bound port as soon as the mock listens (credentials are written).
        package var onListening: @Sendable (Int) async -> Void
        /// Called with the sandbox's port as soon as the mock listens, when ``apps`` name the sandbox.
        package var onSandboxListening: @Sendable (Int) async -> Void
        /// Called with the bound port once live delivery is complete.
        package var onReady: @Sendable (Int) async -> Void

        package init(
            scenario: ScenarioConfiguration = .init(), host: String = "127.0.0.1", port: Int = 0,
            webhookURL: String? = nil, credentialsDirectory: String? = nil, faults: FaultConfiguration = .init(),
            rateLimitPerSecond: Double? = nil, paginationTokenLifetime: Duration = .seconds(600), pageSize: Int = 20,
            keyId: String = "MOCKKEY001", issuerId: String = "57246542-96fe-1a63-e053-0824d011072a",
            webhookWait: Duration = .seconds(120), deliveryTimeout: Duration = .seconds(10), apps: [App] = [], sandboxPort: Int = 0,
            sharedTransactionIds: Bool = false,
            unauthorizedApps: Set<String> = [], appleSizedCertificates: Bool = false, onListening: @escaping @Sendable (Int) async -> Void = { _ in },
            onSandboxListening: @escaping @Sendable (Int) async -> Void = { _ in },
            onReady: @escaping @Sendable (Int) async -> Void = { _ in }
        ) {
            self.scenario = scenario
            self.host = host
            self.port = port
            self.webhookURL = webhookURL
            self.credentialsDirectory = credentialsDirectory
            self.faults = faults
            self.rateLimitPerSecond = rateLimitPerSecond
            self.paginationTokenLifetime = paginationTokenLifetime
            self.pageSize = min(max(pageSize, 1), 20)
            self.keyId = keyId
            self.issuerId = issuerId
            self.webhookWait = webhookWait
            self.deliveryTimeout = deliveryTimeout
            self.apps = apps
            self.sandboxPort = sandboxPort
            self.sharedTransactionIds = sharedTransactionIds
            self.unauthorizedApps = unauthorizedApps
            self.appleSizedCertificates = appleSizedCertificates
            self.onListening = onListening
            self.onSandboxListening = onSandboxListening
            self.onReady = onReady
        }
    }

    package let configuration: Configuration
    /// The CA that signs everything, for every app; trust its root.
    package let authority: SigningCertificateAuthority
    /// The team's In-App Purchase key the mock accepts, for every app.
    package let apiKey: P256.Signing.PrivateKey
    /// Every app in every environment: the simulated ones in the order of ``Configuration/apps``
    /// (the first is today's one app), then the apps in the environments they have no purchases in.
    let worlds: [AppWorld]
    let worldsByKey: [AppKey: AppWorld]
    let statistics: MockStatistics
    let faults: Mutex<FaultConfiguration>
    /// The App Store Connect API key the mock accepts (``appStoreConnect(_:)``), and each app's
    /// notification settings by bundle ID.
    package let appStoreConnectKey: P256.Signing.PrivateKey
    let connectApps: Mutex<[String: AppStoreConnectApp]>
    let tokens: OpaqueToken
    let authenticator: RequestAuthenticator
    let logger: Logger
    /// Per fault kind, the fraction owed so far: a fault rate of r injects exactly ⌊n·r⌋ faults over
    /// n eligible requests, so tests get the faults they ask for without depending on chance.
    let faultDebt = Mutex<[String: Double]>([:])
    /// Each listening environment's port, once bound.
    let boundPorts = Mutex<[AppStoreEnvironment: Int]>([:])
    /// The accounts ``identifiersCSV(bundleId:)`` listed (``ListedAccount``): the truth carries their appUserId.
    let listedAccounts = Mutex<Set<ListedAccount>>([])

    struct TestNotification: Sendable {
        var signedPayload: String
        var attempts: [SendAttemptItem]
    }

    /// The first app in its first environment: the one app of a mock without ``Configuration/apps``.
    var primary: AppWorld { worlds[0] }
    /// The first world's catalog (the one app's).
    var catalog: MockCatalog { primary.catalog }
    /// The first world's scale index (scale mode has one app in one environment).
    var scale: ScaleCatalog? { primary.scale }
    /// The first world's rate limiter.
    var rateLimiter: MockRateLimiter { primary.rateLimiter }
    /// The worlds that simulate customers (every app in each environment it was given).
    var simulatedWorlds: [AppWorld] { worlds.filter(\.simulated) }

    /// Simulates and signs the scenario of every app and environment.
    package static func make(configuration: Configuration, logger: Logger = Logger(label: "mock-appstore")) async throws -> MockAppStore {
        try configuration.validate()
        let seed = "\(configuration.scenario.seed)"
        let earliest = Date(
            timeIntervalSince1970: Double(min(configuration.scenario.earliestActivity, Int64(Date().timeIntervalSince1970 * 1000))) / 1000)
        let authority = try SigningCertificateAuthority(
            options: .init(
                name: "Mock App Store", notValidBefore: earliest.addingTimeInterval(-30 * 86400),
                notValidAfter: Date().addingTimeInterval(2 * 365 * 86400), seed: seed,
                appleSizedCertificates: configuration.appleSizedCertificates))
        let worlds = try await worlds(configuration, signer: authority.signer)
        return MockAppStore(configuration: configuration, authority: authority, worlds: worlds, logger: logger)
    }

    init(configuration: Configuration, authority: SigningCertificateAuthority, worlds: [AppWorld], logger: Logger) {
        self.configuration = configuration
        self.authority = authority
        self.worlds = worlds
        self.worldsByKey = Dictionary(worlds.map { ($0.key, $0) }, uniquingKeysWith: { first, _ in first })
        self.statistics = MockStatistics(apps: worlds.filter(\.simulated).map(\.key))
        self.logger = logger
        self.apiKey = SigningCertificateAuthority.key(seed: "\(configuration.scenario.seed)", label: "api-key")
        self.faults = Mutex(configuration.faults)
        self.appStoreConnectKey = SigningCertificateAuthority.key(seed: "\(configuration.scenario.seed)", label: "app-store-connect-key")
        self.connectApps = Mutex(Self.initialConnectApps(configuration))
        self.tokens = OpaqueToken(key: SymmetricKey(data: SHA256.hash(data: Data("mock-token-\(configuration.scenario.seed)".utf8))))
        self.authenticator = RequestAuthenticator(
            publicKey: apiKey.publicKey, keyId: configuration.keyId, issuerId: configuration.issuerId,
            bundleIds: Set(configuration.servedApps.map(\.bundleId)))
    }

    /// Serves until cancelled or shut down gracefully: binds (production and, with apps in the
    /// sandbox, the sandbox's port), writes the credentials, waits for the webhook to accept
    /// connections, delivers the live traffic of every app, then calls ``Configuration/onReady``.
    package func run() async throws {
        let listeners = configuration.listeners
        try await cancelWhenGracefulShutdown {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for listener in listeners {
                    let server = MockHTTPServer(host: self.configuration.host, port: listener.port) { [self] request in
                        await respond(request, environment: listener.environment)
                    }
                    group.addTask { [self] in
                        try await server.run { [self] port in
                            let all = boundPorts.withLock { ports in
                                ports[listener.environment] = port
                                return ports.count == listeners.count ? ports : nil
                            }
                            // The last to bind starts the mock: every base URL is known.
                            if let all { try await start(ports: all) }
                        }
                    }
                }
                // A server ends only when cancelled or when it fails: either ends the others.
                defer { group.cancelAll() }
                _ = try await group.next()
            }
        }
    }

    /// Writes the credentials, announces the ports, and delivers the live traffic in the background
    /// (the API answers meanwhile).
    private func start(ports: [AppStoreEnvironment: Int]) async throws {
        let mainEnvironment = configuration.listeners[0].environment
        let mainPort = ports[mainEnvironment] ?? configuration.port
        if let directory = configuration.credentialsDirectory {
            try writeCredentials(to: directory, ports: ports)
        }
        for (environment, port) in ports.sorted(by: { $0.key == mainEnvironment && $1.key != mainEnvironment }) {
            logger.info("listening", metadata: ["url": "http://\(configuration.host):\(port)", "environment": "\(environment.rawValue)"])
        }
        await configuration.onListening(mainPort)
        if !configuration.apps.isEmpty, let sandbox = ports[.sandbox] {
            await configuration.onSandboxListening(sandbox)
        }
        if let scale {
            // The whole scale window is an outage: nothing to deliver.
            statistics.liveDeliveryCompleted()
            logger.info(
                "mock-appstore ready",
                metadata: [
                    "url": "http://\(configuration.host):\(mainPort)", "notifications": "\(scale.entries.count)",
                    "customers": "\(scale.customerCount)", "environment": "\(primary.scenario.environment.rawValue)",
                ])
            await configuration.onReady(mainPort)
            return
        }
        Task {
            if let webhook = configuration.webhookURL {
                await waitForWebhook(webhook, timeout: configuration.webhookWait)
            }
            await deliverLiveTraffic()
            for world in simulatedWorlds {
                let snapshot = world.catalog.snapshot
                logger.info(
                    "mock-appstore ready",
                    metadata: [
                        "url": "http://\(configuration.host):\(ports[world.scenario.environment] ?? mainPort)",
                        "notifications": "\(snapshot.notifications.count)", "purchases": "\(GroundTruth.purchases(snapshot.world).count)",
                        "bundleId": "\(world.scenario.bundleId)", "environment": "\(world.scenario.environment.rawValue)",
                    ])
            }
            await configuration.onReady(mainPort)
        }
    }

    /// Waits until something accepts TCP connections at the webhook's host and port.
    func waitForWebhook(_ webhook: String, timeout: Duration) async {
        guard let url = URL(string: webhook), let host = url.host else { return }
        let port = url.port ?? (url.scheme == "https" ? 443 : 80)
        let deadline = ContinuousClock.now + timeout
        var announced = false
        while ContinuousClock.now < deadline {
            if await TCPProbe.canConnect(host: host, port: port) { return }
            if !announced {
                logger.info("waiting for the webhook to accept connections", metadata: ["webhook": "\(webhook)"])
                announced = true
            }
            try? await Task.sleep(for: .milliseconds(200))
        }
        logger.warning("the webhook never accepted a connection; delivering anyway (attempts will fail)", metadata: ["webhook": "\(webhook)"])
    }

    /// The ground truth of every app and environment as JSON lines, in the shape and order of
    /// `reconciler export` (by originalTransactionId, then bundleId, then environment).
    /// - Parameter now: the moment `entitled` is judged at, UNIX ms (`GET /mock/truth?at=`).
    package func truthJSONLines(at now: Int64 = Int64(Date().timeIntervalSince1970 * 1000)) throws -> String {
        try truth(at: now).map { try $0.jsonLine() + "\n" }.joined()
    }

    /// The ground truth of every app and environment, in `reconciler export`'s order.
    package var truth: [PurchaseState] { truth(at: Int64(Date().timeIntervalSince1970 * 1000)) }

    func truth(at now: Int64) -> [PurchaseState] {
        let purchases = simulatedWorlds.flatMap { world in
            world.scale?.truth(at: now) ?? withAppUserIds(GroundTruth.purchases(world.catalog.snapshot.world, at: now), of: world)
        }
        guard simulatedWorlds.count > 1 else { return purchases }
        return purchases.sorted { a, b in
            let (left, right) = (a.environment?.rawValue ?? "", b.environment?.rawValue ?? "")
            return (a.originalTransactionId, a.bundleId ?? "", left) < (b.originalTransactionId, b.bundleId ?? "", right)
        }
    }

    /// Every transaction's order ID, by app and environment (in the order of the apps), then by
    /// account, then purchase.
    package var orders: [MockOrder] {
        simulatedWorlds.flatMap { world in
            let key = world.key
            return (world.scale?.orders() ?? world.catalog.snapshot.orderEntries).map { order in
                var order = order
                order.bundleId = key.bundleId
                order.environment = key.environment.rawValue
                return order
            }
        }
    }

    /// The order IDs as JSON lines (`GET /mock/orders`, `mock-appstore --print-orders`).
    package func ordersJSONLines() throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return try orders.map { String(decoding: try encoder.encode($0), as: UTF8.self) + "\n" }.joined()
    }

    /// The variables that point a reconciler at this mock's first app in its first environment
    /// (the one app of a mock without ``Configuration/apps``), whose API is at `port`.
    package func reconcilerEnvironment(port: Int, directory: String) -> [(String, String)] {
        let scenario = primary.scenario
        return [
            ("APP_STORE_API_BASE_URL", "http://\(advertisedHost):\(port)"),
            ("APP_STORE_KEY_ID", configuration.keyId),
            ("APP_STORE_ISSUER_ID", configuration.issuerId),
            ("APP_STORE_PRIVATE_KEY_PATH", "\(directory)/AuthKey_\(configuration.keyId).p8"),
            ("APP_STORE_BUNDLE_ID", scenario.bundleId),
            ("APP_STORE_APP_APPLE_ID", String(scenario.appAppleId)),
            ("APP_STORE_ENVIRONMENT", scenario.environment == .production ? "production" : "sandbox"),
            ("APP_STORE_ROOT_CERTIFICATES", "\(directory)/root.pem"),
            // Apple sends no expiry for non-renewing subscriptions: the app says how long each lasts.
            ("RECONCILER_NON_RENEWING_TERMS", EntitlementPolicy.formatTerms(nonRenewingTerms)),
        ]
    }

    /// The terms of the non-renewing subscriptions the mock sells, by product ID (ms), the same for every app.
    package var nonRenewingTerms: [String: Int64] {
        [MockProduct.seasonPass.productId: MockProduct.seasonPass.periods * configuration.scenario.renewalPeriod]
    }

    /// Writes `root.pem`, the team key, `reconciler.env` (the first app) and `reconciler.yaml` (every app).
    func writeCredentials(to directory: String, ports: [AppStoreEnvironment: Int]) throws {
        let absolute = URL(fileURLWithPath: directory).standardizedFileURL.path
        try FileManager.default.createDirectory(atPath: absolute, withIntermediateDirectories: true)
        try authority.rootPEM.write(toFile: "\(absolute)/root.pem", atomically: true, encoding: .utf8)
        let keyPath = "\(absolute)/AuthKey_\(configuration.keyId).p8"
        try apiKey.pemRepresentation.write(toFile: keyPath, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: keyPath)
        let connectKeyPath = "\(absolute)/AuthKey_\(Self.appStoreConnectKeyId).p8"
        try appStoreConnectKey.pemRepresentation.write(toFile: connectKeyPath, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: connectKeyPath)
        let primaryPort = ports[primary.scenario.environment] ?? configuration.port
        let lines = reconcilerEnvironment(port: primaryPort, directory: absolute).map { "\($0.0)=\($0.1)" }
        try (lines.joined(separator: "\n") + "\n").write(toFile: "\(absolute)/reconciler.env", atomically: true, encoding: .utf8)
        let baseURLs = ports.mapValues { "http://\(advertisedHost):\($0)" }
        try reconcilerConfigurationYAML(baseURLs: baseURLs, directory: absolute)
            .write(toFile: "\(absolute)/reconciler.yaml", atomically: true, encoding: .utf8)
    }
}

/// The send attempts of every notification, as Get Notification History reports them.
final class SendAttemptLog: Sendable {
    private let attempts = Mutex<[String: [SendAttemptItem]]>([:])

    func record(_ uuid: String, _ item: SendAttemptItem) {
        attempts.withLock { $0[uuid, default: []].append(item) }
    }

    func attempts(_ uuid: String) -> [SendAttemptItem] {
        attempts.withLock { $0[uuid] ?? [] }
    }
}
