import AppStoreServer
import ArgumentParser
import Logging
import Reconciler
import ReconcilerConfiguration
import ReconcilerDomain
import ReconcilerStore

extension APIOptions {
    /// The app API's callers of Apple in `serve`: one ``AppRefresher`` per configured app and
    /// environment that has an In-App Purchase key (the configuration file's `key`), its client
    /// capped at `appApi.refreshRateLimit` (default 10% of the app's budget) even before it joins
    /// the shared budget. An app without a key gets none: its refreshes answer the stored state
    /// with `fresh: false`, its consumption answers 503 `NO_API_KEY`. A key that cannot be read
    /// (serve's host may not mount it) is said in one warning and treated as none: the webhook
    /// does not need it, so serve still starts.
    static func appAPIRefreshers(
        targets: [ReconcilerConfiguration.Target], verifiers: [SignedDataVerifier], settings: ReconcilerConfiguration.AppAPISettings,
        database: Database, logger: Logger
    ) throws -> [AppRefresher] {
        // serve has no Apple flags: the defaults, and the environment variables every command reads (APP_STORE_API_BASE_URL, APP_STORE_RATE_LIMIT).
        let api = try APIOptions.parse([])
        var keys = PrivateKeys()
        return try zip(targets, verifiers).compactMap { target, verifier in
            guard target.key != nil else { return nil }
            let budget = try api.requestBudget(for: target)
            let client: AppStoreServerAPIClient
            var capped = budget
            for (endpoint, cap) in AppRefresher.requestsPerSecond(budget: budget, refreshRateLimit: settings.refreshRateLimit) {
                capped.app[endpoint] = cap
            }
            do {
                client = try api.client(for: target, budget: capped, keys: &keys)
            } catch {
                logger.warning(
                    "the app API cannot call Apple for this app: its refreshes answer the stored state (fresh: false), its consumption answers 503",
                    metadata: ["app": "\(target.app)", "error": "\(error)"])
                return nil
            }
            return AppRefresher(
                configuration: .init(refreshRateLimit: settings.refreshRateLimit),
                scope: target.scope, database: database, verifier: verifier, client: client,
                origins: target.origins, budget: budget)
        }
    }
}
