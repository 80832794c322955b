package import AppStoreServer
package import Crypto
import Foundation
import Logging
import Synchronization

extension MockAppStore {
    /// Runs the mock in this process for the duration of `body`, which receives its base URL
    /// (`http://127.0.0.1:PORT`). For tests, benchmarks and rehearsals.
    ///
    /// ```swift
    /// try await MockAppStore.withRunning(.init(scenario: .init(seed: 3, customers: 20))) { mock, baseURL in
    ///     let client = mock.client(baseURL: baseURL)
    /// }
    /// ```
    package static func withRunning<Result: Sendable>(
        _ configuration: Configuration, _ body: (MockAppStore, String) async throws -> Result
    ) async throws -> Result {
        let (configuration, ports) = signallingReadiness(configuration)
        let mock = try await make(configuration: configuration)
        return try await mock.withRunning(ports: ports, body)
    }

    /// Runs a mock that serves a world built by hand as its one app (for conformance tests with
    /// exact expectations; `configuration.apps` stays empty).
    static func withRunning<Result: Sendable>(
        world: ScenarioWorld, _ configuration: Configuration, _ body: (MockAppStore, String) async throws -> Result
    ) async throws -> Result {
        precondition(configuration.apps.isEmpty, "a world built by hand is the one app of its scenario")
        let (configuration, ports) = signallingReadiness(configuration)
        let authority = try SigningCertificateAuthority()
        let catalog = try await MockCatalog(world: world, configuration: configuration.scenario, signer: authority.signer)
        let mock = MockAppStore(
            configuration: configuration, authority: authority, worlds: [AppWorld(scenario: configuration.scenario, catalog: catalog)],
            logger: .init(label: "mock"))
        return try await mock.withRunning(ports: ports, body)
    }

    /// The configuration with `onReady` also yielding the port to the returned stream.
    private static func signallingReadiness(_ configuration: Configuration) -> (Configuration, AsyncStream<Int>) {
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        var configuration = configuration
        let callerOnReady = configuration.onReady
        configuration.onReady = { port in
            await callerOnReady(port)
            continuation.yield(port)
        }
        return (configuration, ports)
    }

    private func withRunning<Result: Sendable>(
        ports: AsyncStream<Int>, _ body: (MockAppStore, String) async throws -> Result
    ) async throws -> Result {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await self.run() }
            defer { group.cancelAll() }
            var iterator = ports.makeAsyncIterator()
            guard let port = await iterator.next() else { throw CancellationError() }
            return try await body(self, "http://127.0.0.1:\(port)")
        }
    }

    /// A client configured to call this mock with the key it accepts, for an app in an environment
    /// (by default the first app in its first environment, whose API must be at `baseURL`).
    package func client(
        baseURL: String, requestsPerSecond: Double? = nil, retryPolicy: AppStoreServerAPIClient.RetryPolicy = .init(),
        requestTimeout: Duration = .seconds(10), keyId: String? = nil, privateKey: P256PrivateKey? = nil, bundleId: String? = nil,
        environment: AppStoreEnvironment? = nil
    ) -> AppStoreServerAPIClient {
        var budget: [AppStoreServerAPIEndpoint: Double]?
        if let requestsPerSecond {
            budget = Dictionary(uniqueKeysWithValues: AppStoreServerAPIEndpoint.all.map { ($0, requestsPerSecond) })
        }
        return AppStoreServerAPIClient(
            configuration: .init(
                baseURL: baseURL,
                tokens: .init(
                    privateKey: privateKey ?? apiKey, keyId: keyId ?? configuration.keyId, issuerId: configuration.issuerId,
                    bundleId: bundleId ?? primary.scenario.bundleId),
                environment: environment ?? primary.scenario.environment, requestTimeout: requestTimeout, retryPolicy: retryPolicy,
                requestsPerSecond: budget))
    }

    /// A client for an app in an environment, at that environment's base URL (once the mock listens).
    ///
    /// ```swift
    /// let sandbox = try mock.client(bundleId: "com.example.one", environment: .sandbox)
    /// ```
    package func client(
        bundleId: String, environment: AppStoreEnvironment, requestsPerSecond: Double? = nil,
        retryPolicy: AppStoreServerAPIClient.RetryPolicy = .init(), requestTimeout: Duration = .seconds(10)
    ) throws -> AppStoreServerAPIClient {
        guard let baseURL = baseURL(for: environment) else {
            throw ConfigurationError(.invalidApp, "the mock does not serve \(environment.rawValue), or does not listen yet")
        }
        return client(
            baseURL: baseURL, requestsPerSecond: requestsPerSecond, retryPolicy: retryPolicy, requestTimeout: requestTimeout,
            bundleId: bundleId, environment: environment)
    }

    /// A verifier that trusts this mock's root, for an app and environment (by default the first
    /// app in its first environment).
    package func verifier(bundleId: String? = nil, environment: AppStoreEnvironment? = nil) throws -> SignedDataVerifier {
        let app = apps.first { $0.bundleId == (bundleId ?? primary.scenario.bundleId) }
        return try SignedDataVerifier(
            configuration: .init(
                rootCertificates: [authority.root], bundleId: bundleId ?? primary.scenario.bundleId,
                appAppleId: app?.appAppleId ?? primary.scenario.appAppleId, environment: environment ?? primary.scenario.environment))
    }

    /// What the mock saw so far.
    package var statisticsSnapshot: MockStatisticsSnapshot { statistics.snapshot }

    /// Replaces the fault configuration while running.
    package func setFaults(_ faults: FaultConfiguration) { self.faults.withLock { $0 = faults } }

    /// The notifications of the first app in its first environment with their first send attempt,
    /// in Get Notification History's order (by first send attempt, or by `signedDate` in that mode).
    package var sentNotifications: [(notification: ScenarioWorld.PlannedNotification, firstAttemptDate: Int64)] {
        catalog.snapshot.notifications.map { ($0.plan, $0.firstAttemptDate) }
    }

    /// The notifications of an app in an environment (none for one the mock does not simulate),
    /// as ``sentNotifications`` lists them.
    package func sentNotifications(
        bundleId: String, environment: AppStoreEnvironment
    ) -> [(notification: ScenarioWorld.PlannedNotification, firstAttemptDate: Int64)] {
        guard let world = worldsByKey[AppKey(bundleId: bundleId, environment: environment)] else { return [] }
        return world.catalog.snapshot.notifications.map { ($0.plan, $0.firstAttemptDate) }
    }

    /// The send attempts recorded for a notification, whichever app's it is.
    package func sendAttempts(notificationUUID: String) -> [SendAttemptItem] {
        worlds.lazy.map { $0.attempts.attempts(notificationUUID) }.first { !$0.isEmpty } ?? []
    }
}

package typealias P256PrivateKey = P256.Signing.PrivateKey
package typealias MockStatisticsSnapshot = MockStatistics.Counts
