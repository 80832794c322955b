import AppStoreServer
import ArgumentParser
import Logging
import Reconciler
import ReconcilerConfiguration
import ReconcilerDomain
import ReconcilerStore
import ServiceLifecycle

/// `serve`'s callers of Apple, built once per configured app and environment: one App Store client
/// (one rate limiter) and one lease on the app's shared budget (``BudgetLease``), shared by the app
/// API's refreshes and consumption answers (an ``AppRefresher``, with `appApi` and the app's
/// `key`) and the leader's automatic consumption answers (`consumption.automatic: true`; the key
/// from the file, or the APP_STORE_* variables without one), so the process's own callers take
/// their turns from one limiter and declare one claim to the app's other processes.
///
/// The refreshes' endpoints are capped at `appApi.refreshRateLimit` (default 10% of the app's
/// budget) in the lease's claims; Send Consumption Information takes the larger of the callers'
/// caps. A key that cannot be read (serve's host may not mount it) is said in one warning per
/// caller and treated as none: the webhook does not need it, so serve still starts.
struct ServeAppleCallers {
    /// The app API's, one per app with a key (none without `appApi`).
    var refreshers: [AppRefresher] = []
    /// The leader's automatic consumption answers.
    var consumption: [ConsumptionResponder.Target] = []
    /// Every lease, left on serve's graceful shutdown (``Leaving``).
    var leases: [BudgetLease] = []

    init(
        targets: [ReconcilerConfiguration.Target], verifiers: [SignedDataVerifier], appAPI: ReconcilerConfiguration.AppAPISettings?,
        database: Database, logger: Logger
    ) throws {
        let wanted = zip(targets, verifiers).filter { target, _ in
            (appAPI != nil && target.key != nil) || target.consumption.policy?.automatic == true
        }
        guard !wanted.isEmpty else { return }
        // serve has no Apple flags: the defaults, and the environment variables every command reads (APP_STORE_API_BASE_URL, APP_STORE_RATE_LIMIT).
        let api = try APIOptions.parse([])
        var keys = APIOptions.PrivateKeys()
        for (target, verifier) in wanted {
            let refreshes = appAPI != nil && target.key != nil
            let automatic = target.consumption.policy?.automatic == true
            var keyed = target
            if keyed.key == nil, automatic { keyed.key = try api.environmentKey() }
            let budget = try api.requestBudget(for: keyed)
            let client: AppStoreServerAPIClient
            do {
                client = try api.client(for: keyed, budget: budget, keys: &keys)
            } catch {
                if refreshes {
                    logger.warning(
                        "the app API cannot call Apple for this app: its refreshes answer the stored state (fresh: false), its consumption answers 503",
                        metadata: ["app": "\(target.app)", "error": "\(error)"])
                }
                if automatic {
                    logger.warning(
                        "consumption.automatic: serve cannot call Apple for \(target.app) (\((error as? ReconcilerError)?.description ?? "\(error)")); each run answers its due requests instead"
                    )
                }
                continue
            }
            var claims = automatic ? budget.claims([.sendConsumptionInformation]) : [:]
            if refreshes {
                claims.merge(AppRefresher.claims(budget: budget, refreshRateLimit: appAPI?.refreshRateLimit)) { consumption, refresh in
                    (consumption.cap ?? .infinity) >= (refresh.cap ?? .infinity) ? consumption : refresh
                }
            }
            let lease = BudgetLease(
                budget: SharedBudget(configuration: .init(claims: claims), database: database, limiter: client.rateLimiter, app: target.app))
            leases.append(lease)
            if refreshes {
                refreshers.append(
                    AppRefresher(
                        configuration: .init(refreshRateLimit: appAPI?.refreshRateLimit), scope: target.scope, database: database,
                        verifier: verifier, client: client, origins: target.origins, lease: lease))
            }
            if automatic,
                let answers = ConsumptionResponder.Target(
                    app: target.app, settings: target.consumption, client: client, origins: target.origins, lease: lease)
            {
                consumption.append(answers)
            }
        }
    }

    /// Leaves every lease on serve's graceful shutdown, after the services that call Apple stopped
    /// (a lease left behind keeps the app's other processes' shares down until it runs out).
    struct Leaving: Service {
        let leases: [BudgetLease]

        func run() async throws {
            try? await gracefulShutdown()
            for lease in leases { await lease.stop() }
        }
    }
}
