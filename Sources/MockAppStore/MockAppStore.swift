import AppStoreServer
import Crypto
import Foundation
import Logging
import ReconcilerShared
import ServiceLifecycle
import Synchronization

/// A local App Store imitation for tests, demos and rehearsals: it simulates an app's customers
/// (``ScenarioConfiguration``), signs their notifications and transactions with its own CA
/// (carrying Apple's OIDs), delivers notifications to a webhook outside the outage window, and
/// serves Get Notification History, Get Transaction History, Get All Subscription Statuses, Look Up
/// Order ID and the test-notification endpoints with Apple's documented semantics, faults on
/// demand included.
///
/// ```swift
/// let mock = try await MockAppStore.make(configuration: .init(
///     scenario: .init(seed: 7, customers: 200, outageStart: start, outageEnd: end),
///     webhookURL: "http://127.0.0.1:8080/notifications", credentialsDirectory: "/tmp/mock"))
/// try await ServiceGroup(services: [mock], logger: logger).run()
/// ```
///
/// `GET /mock/truth` returns the final state of every purchase in the shape of `reconciler export`;
/// `GET /mock/orders` every transaction's order ID.
public final class MockAppStore: Service, Sendable {
    public struct Configuration: Sendable {
        public var scenario: ScenarioConfiguration
        public var host: String
        /// 0 picks a free port; see ``onReady``.
        public var port: Int
        /// Where live notifications go (`nil`: deliveries outside the outage count as successful).
        public var webhookURL: String?
        /// Receives `root.pem`, the API key (`.p8`) and `reconciler.env`.
        public var credentialsDirectory: String?
        public var faults: FaultConfiguration
        /// Requests per second per endpoint before 429 (`nil`: Apple's, 50 in production, 5 in the sandbox).
        /// Look Up Order ID never allows more than Apple's 10 (1 in the sandbox), the test endpoints 1 (0.1).
        public var rateLimitPerSecond: Double?
        /// How long a pagination token stays valid.
        public var paginationTokenLifetime: Duration
        /// Entries per page of both histories: Apple sends up to 20; fewer makes tests page more.
        public var pageSize: Int
        public var keyId: String
        public var issuerId: String
        /// How long to wait for the webhook to accept connections before delivering.
        public var webhookWait: Duration
        /// Called with the bound port as soon as the mock listens (credentials are written).
        public var onListening: @Sendable (Int) async -> Void
        /// Called with the bound port once live delivery is complete.
        public var onReady: @Sendable (Int) async -> Void

        public init(
            scenario: ScenarioConfiguration = .init(), host: String = "127.0.0.1", port: Int = 0,
            webhookURL: String? = nil, credentialsDirectory: String? = nil, faults: FaultConfiguration = .init(),
            rateLimitPerSecond: Double? = nil, paginationTokenLifetime: Duration = .seconds(600), pageSize: Int = 20,
            keyId: String = "MOCKKEY001", issuerId: String = "57246542-96fe-1a63-e053-0824d011072a",
            webhookWait: Duration = .seconds(120), onListening: @escaping @Sendable (Int) async -> Void = { _ in },
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
            self.onListening = onListening
            self.onReady = onReady
        }
    }

    public let configuration: Configuration
    /// The CA that signs everything; trust its root.
    public let authority: SigningCertificateAuthority
    /// The In-App Purchase key the mock accepts.
    public let apiKey: P256.Signing.PrivateKey
    let catalog: MockCatalog
    /// The scale scenario's index (`ScenarioConfiguration.scaleNotifications`), which the endpoints serve instead of `catalog`.
    let scale: ScaleCatalog?
    let attempts = SendAttemptLog()
    let statistics = MockStatistics()
    let rateLimiter = MockRateLimiter()
    let faults: Mutex<FaultConfiguration>
    let tokens: OpaqueToken
    let authenticator: RequestAuthenticator
    let testNotifications = Mutex<[String: TestNotification]>([:])
    let logger: Logger
    /// Per fault kind, the fraction owed so far: a fault rate of r injects exactly ⌊n·r⌋ faults over
    /// n eligible requests, so tests get the faults they ask for without depending on chance.
    let faultDebt = Mutex<[String: Double]>([:])

    struct TestNotification: Sendable {
        var signedPayload: String
        var attempts: [SendAttemptItem]
    }

    /// Simulates and signs the scenario.
    public static func make(configuration: Configuration, logger: Logger = Logger(label: "mock-appstore")) async throws -> MockAppStore {
        let seed = "\(configuration.scenario.seed)"
        let earliest = Date(timeIntervalSince1970: Double(min(configuration.scenario.start, Int64(Date().timeIntervalSince1970 * 1000))) / 1000)
        let authority = try SigningCertificateAuthority(
            options: .init(
                name: "Mock App Store", notValidBefore: earliest.addingTimeInterval(-30 * 86400),
                notValidAfter: Date().addingTimeInterval(2 * 365 * 86400), seed: seed))
        if let target = configuration.scenario.scaleNotifications {
            let scale = try await ScaleCatalog(configuration: configuration.scenario, notifications: target, signer: authority.signer)
            let catalog = try await MockCatalog(world: ScenarioWorld(), configuration: configuration.scenario, signer: authority.signer)
            return MockAppStore(configuration: configuration, authority: authority, catalog: catalog, scale: scale, logger: logger)
        }
        let world = ScenarioGenerator.generate(configuration.scenario)
        let catalog = try await MockCatalog(world: world, configuration: configuration.scenario, signer: authority.signer)
        return MockAppStore(configuration: configuration, authority: authority, catalog: catalog, logger: logger)
    }

    init(configuration: Configuration, authority: SigningCertificateAuthority, catalog: MockCatalog, scale: ScaleCatalog? = nil, logger: Logger) {
        self.configuration = configuration
        self.authority = authority
        self.catalog = catalog
        self.scale = scale
        self.logger = logger
        self.apiKey = SigningCertificateAuthority.key(seed: "\(configuration.scenario.seed)", label: "api-key")
        self.faults = Mutex(configuration.faults)
        self.tokens = OpaqueToken(key: SymmetricKey(data: SHA256.hash(data: Data("mock-token-\(configuration.scenario.seed)".utf8))))
        self.authenticator = RequestAuthenticator(
            publicKey: apiKey.publicKey, keyId: configuration.keyId, issuerId: configuration.issuerId,
            bundleId: configuration.scenario.bundleId)
    }

    /// Serves until cancelled or shut down gracefully: binds, writes the credentials, waits for the
    /// webhook to accept connections, delivers the live traffic, then calls ``Configuration/onReady``.
    public func run() async throws {
        let server = MockHTTPServer(host: configuration.host, port: configuration.port) { [self] request in
            await respond(request)
        }
        try await cancelWhenGracefulShutdown {
            try await server.run { [self] port in
                if let directory = configuration.credentialsDirectory {
                    try writeCredentials(to: directory, port: port)
                }
                logger.info("listening", metadata: ["url": "http://\(configuration.host):\(port)"])
                await configuration.onListening(port)
                if let scale {
                    // The whole scale window is an outage: nothing to deliver.
                    statistics.update { $0.liveDeliveryComplete = true }
                    logger.info(
                        "mock-appstore ready",
                        metadata: [
                            "url": "http://\(configuration.host):\(port)", "notifications": "\(scale.entries.count)",
                            "customers": "\(scale.customerCount)", "environment": "\(configuration.scenario.environment.rawValue)",
                        ])
                    await configuration.onReady(port)
                    return
                }
                // Deliver in the background so the API answers meanwhile.
                Task {
                    if let webhook = configuration.webhookURL {
                        await waitForWebhook(webhook, timeout: configuration.webhookWait)
                    }
                    await deliverLiveTraffic()
                    let snapshot = catalog.snapshot
                    logger.info(
                        "mock-appstore ready",
                        metadata: [
                            "url": "http://\(configuration.host):\(port)", "notifications": "\(snapshot.notifications.count)",
                            "purchases": "\(GroundTruth.purchases(snapshot.world).count)",
                            "environment": "\(configuration.scenario.environment.rawValue)",
                        ])
                    await configuration.onReady(port)
                }
            }
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

    /// The ground truth as JSON lines, in the shape of `reconciler export`.
    /// - Parameter now: the moment `entitled` is judged at, UNIX ms (`GET /mock/truth?at=`).
    public func truthJSONLines(at now: Int64 = Int64(Date().timeIntervalSince1970 * 1000)) throws -> String {
        guard let scale else { return try GroundTruth.jsonLines(catalog.snapshot.world, at: now) }
        return try scale.truth(at: now).map { try $0.jsonLine() + "\n" }.joined()
    }

    /// The ground truth.
    public var truth: [PurchaseState] { scale?.truth() ?? GroundTruth.purchases(catalog.snapshot.world) }

    /// Every transaction's order ID, by account then purchase.
    public var orders: [MockOrder] { scale?.orders() ?? catalog.snapshot.orderEntries }

    /// The order IDs as JSON lines (`GET /mock/orders`, `mock-appstore --print-orders`).
    public func ordersJSONLines() throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return try orders.map { String(decoding: try encoder.encode($0), as: UTF8.self) + "\n" }.joined()
    }

    /// The variables that point a reconciler at this mock.
    public func reconcilerEnvironment(port: Int, directory: String) -> [(String, String)] {
        let scenario = configuration.scenario
        return [
            ("APP_STORE_API_BASE_URL", "http://\(configuration.host == "0.0.0.0" ? "127.0.0.1" : configuration.host):\(port)"),
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

    /// The terms of the non-renewing subscriptions the mock sells, by product ID (ms).
    public var nonRenewingTerms: [String: Int64] {
        [MockProduct.seasonPass.productId: MockProduct.seasonPass.periods * configuration.scenario.renewalPeriod]
    }

    func writeCredentials(to directory: String, port: Int) throws {
        let absolute = URL(fileURLWithPath: directory).standardizedFileURL.path
        try FileManager.default.createDirectory(atPath: absolute, withIntermediateDirectories: true)
        try authority.rootPEM.write(toFile: "\(absolute)/root.pem", atomically: true, encoding: .utf8)
        let keyPath = "\(absolute)/AuthKey_\(configuration.keyId).p8"
        try apiKey.pemRepresentation.write(toFile: keyPath, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: keyPath)
        let lines = reconcilerEnvironment(port: port, directory: absolute).map { "\($0.0)=\($0.1)" }
        try (lines.joined(separator: "\n") + "\n").write(toFile: "\(absolute)/reconciler.env", atomically: true, encoding: .utf8)
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
