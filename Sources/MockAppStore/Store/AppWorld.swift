package import AppStoreServer
import Foundation
import Synchronization

/// An app in an environment: what routes an API request (the JWT's `bid` and the base URL it came
/// to) and labels the mock's statistics.
package struct AppKey: Hashable, Comparable, Sendable, CustomStringConvertible {
    package var bundleId: String
    package var environment: AppStoreEnvironment

    package init(bundleId: String, environment: AppStoreEnvironment) {
        self.bundleId = bundleId
        self.environment = environment
    }

    /// `com.example.one/Production`: the key of ``MockStatistics/Counts/apps``.
    package var description: String { "\(bundleId)/\(environment.rawValue)" }

    /// By bundle ID, then environment, as `reconciler export` orders purchases of one original transaction ID.
    package static func < (a: AppKey, b: AppKey) -> Bool { (a.bundleId, a.environment.rawValue) < (b.bundleId, b.environment.rawValue) }
}

/// One app in one environment as the mock simulates it. Apple keeps each app's purchases apart, and
/// the sandbox apart from production, so each is a world of its own: its customers (seeded apart),
/// its transaction IDs, its send attempts, its rate limiter (Apple limits each app separately) and
/// its test notifications.
final class AppWorld: Sendable {
    /// The world's app and environment, seed and block of transaction IDs.
    let scenario: ScenarioConfiguration
    let catalog: MockCatalog
    /// The scale scenario's index (`ScenarioConfiguration.scaleNotifications`), which the endpoints serve instead of `catalog`.
    let scale: ScaleCatalog?
    /// `false` for an app in an environment the mock serves but does not simulate for it: the app
    /// exists there with no purchases (Apple has every app in both environments).
    let simulated: Bool
    let attempts = SendAttemptLog()
    let rateLimiter = MockRateLimiter()
    let testNotifications = Mutex<[String: MockAppStore.TestNotification]>([:])
    /// The answers to consumption requests it accepted (Send Consumption Information).
    let consumptionAnswers = Mutex<[MockAppStore.ReceivedConsumptionAnswer]>([])

    init(scenario: ScenarioConfiguration, catalog: MockCatalog, scale: ScaleCatalog? = nil, simulated: Bool = true) {
        self.scenario = scenario
        self.catalog = catalog
        self.scale = scale
        self.simulated = simulated
    }

    /// Simulates and signs `scenario` (its scale index in scale mode).
    static func simulate(_ scenario: ScenarioConfiguration, signer: JWSSigner) async throws -> AppWorld {
        if let target = scenario.scaleNotifications {
            let scale = try await ScaleCatalog(configuration: scenario, notifications: target, signer: signer)
            let catalog = try await MockCatalog(world: ScenarioWorld(), configuration: scenario, signer: signer)
            return AppWorld(scenario: scenario, catalog: catalog, scale: scale)
        }
        let world = ScenarioGenerator.generate(scenario)
        return AppWorld(scenario: scenario, catalog: try await MockCatalog(world: world, configuration: scenario, signer: signer))
    }

    /// The app in an environment where it has no purchases.
    static func empty(_ scenario: ScenarioConfiguration, signer: JWSSigner) async throws -> AppWorld {
        var scenario = scenario
        scenario.forgedNotifications = 0
        scenario.scaleNotifications = nil
        let catalog = try await MockCatalog(world: ScenarioWorld(), configuration: scenario, signer: signer)
        return AppWorld(scenario: scenario, catalog: catalog, simulated: false)
    }

    var key: AppKey { AppKey(bundleId: scenario.bundleId, environment: scenario.environment) }

    /// What the endpoints about one customer read: the whole scenario, or in scale mode the world
    /// of the customer owning the transaction (an empty one when no customer has it).
    func snapshot(forTransaction transactionId: String) -> MockCatalog.Snapshot {
        guard let scale else { return catalog.snapshot }
        return scale.snapshot(ofTransaction: transactionId) ?? Self.noCustomer
    }

    /// What a scale-mode request reads when no customer has its ID.
    private static let noCustomer = MockCatalog.Snapshot(world: ScenarioWorld(), notifications: [], transactionsByAccount: [:])

    /// What Look Up Order ID reads for `orderId`.
    func snapshot(forOrder orderId: String) -> MockCatalog.Snapshot {
        guard let scale else { return catalog.snapshot }
        return scale.snapshot(ofOrder: orderId) ?? Self.noCustomer
    }

    /// Whether a customer of this world has the transaction ID.
    func has(transactionId: String) -> Bool {
        snapshot(forTransaction: transactionId).account(ofTransaction: transactionId) != nil
    }

    /// Whether this world knows the order ID (a forged one included).
    func has(orderId: String) -> Bool {
        let snapshot = snapshot(forOrder: orderId)
        return snapshot.world.orders[orderId]?.isEmpty == false || snapshot.forgedOrders[orderId] != nil
    }
}
