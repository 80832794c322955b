import AppStoreServer
import Reconciler
import ReconcilerConfiguration
import ReconcilerDomain

/// One app in one environment as a command that calls Apple works with it: what the configuration
/// says of it, the verifier of its signed data, its App Store Server API client (the JWT names the
/// app in its `bid`) and its request budget, which Apple sets per app.
struct CommandTarget: Sendable {
    let configuration: ReconcilerConfiguration.Target
    let verifier: SignedDataVerifier
    let client: AppStoreServerAPIClient
    let budget: RequestBudget

    var app: AppTarget { configuration.app }
    /// The app and environment with its rule for `entitled`, for every writer of its purchases.
    var scope: AppScope { configuration.scope }
    /// Where its settings came from, for the hints that name them.
    var origins: SettingOrigins { configuration.origins }

    /// What this command shares of the app's budget with its other processes, for these endpoints.
    func sharing(_ endpoints: [AppStoreServerAPIEndpoint]) -> BudgetSharing {
        BudgetSharing(client: client, target: app, budget: budget, endpoints: endpoints)
    }

    /// Runs `work`, which calls Apple as this app and environment: what ends it names the settings
    /// its hint asks to check where they were set (Apple's 401: the key and bundle ID, as
    /// `key.id … in /etc/reconciler/reconciler.yaml` or `APP_STORE_KEY_ID …`).
    func callingApple<T>(_ work: () async throws -> T) async throws -> T {
        do {
            return try await work()
        } catch {
            throw ReconcilerError.naming(origins, in: error)
        }
    }
}

extension [CommandTarget] {
    /// In the configuration's order of apps, each app's production before its sandbox: how a
    /// command given `--app` alone goes through an app configured in both (`repair`, `check-webhook`).
    func productionFirst() -> [CommandTarget] {
        var bundleIds: [String] = []
        for target in self where !bundleIds.contains(target.app.bundleId) { bundleIds.append(target.app.bundleId) }
        return bundleIds.flatMap { bundleId in
            filter { $0.app.bundleId == bundleId && $0.app.environment == .production }
                + filter { $0.app.bundleId == bundleId && $0.app.environment != .production }
        }
    }
}

extension ReconcilerError {
    /// What ends a command over several apps and environments that went on past failures: the
    /// most pressing failure's code (1 > 2 > 4), with every failure named by its app; one target's
    /// failure as it is. `nil` when nothing failed.
    static func worst(of failures: [(app: AppTarget, error: ReconcilerError)], several: Bool) -> ReconcilerError? {
        let errors = failures.map(\.error)
        guard let index = ExitClass.mostPressing(errors.map(\.exitCode)) ?? errors.indices.first else { return nil }
        guard several else { return errors[index] }
        return ReconcilerError(errors[index].code, failures.map { "\($0.app): \($0.error)" }.joined(separator: "; "))
    }
}

/// The configuration a command that calls Apple loaded, and its targets ready to call Apple.
struct LoadedTargets: Sendable {
    /// Everything the file (or the APP_STORE_* variables) says, before `--app` and `--environment`.
    let configuration: ReconcilerConfiguration
    /// What `--app` and `--environment` leave of it.
    let targets: [CommandTarget]
}

extension AppOptions {
    /// The configuration, read once, and every app and environment this command works on, ready
    /// to call Apple (apps that share a key file share its one read).
    func loadTargets(api: APIOptions) throws -> LoadedTargets {
        var configuration = try self.configuration(key: try api.environmentKey(), apiBaseURL: api.baseURLOverride())
        if configurationFile == nil {
            for index in configuration.targets.indices { api.namingFlags(in: &configuration.targets[index].origins) }
        }
        let targets = try self.targets(in: configuration)
        let verifiers = try verifiers(for: targets, roots: configuration.rootCertificates)
        var keys = APIOptions.PrivateKeys()
        let commandTargets = try zip(targets, verifiers).map { target, verifier in
            let budget = try api.requestBudget(for: target)
            return CommandTarget(
                configuration: target, verifier: verifier, client: try api.client(for: target, budget: budget, keys: &keys), budget: budget)
        }
        return LoadedTargets(configuration: configuration, targets: commandTargets)
    }

    /// Every app and environment this command works on, ready to call Apple.
    func commandTargets(api: APIOptions) throws -> [CommandTarget] {
        try loadTargets(api: api).targets
    }
}
