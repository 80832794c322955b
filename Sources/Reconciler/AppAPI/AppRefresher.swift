package import AppStoreServer
import Foundation
import Logging
package import ReconcilerDomain
package import ReconcilerShared
package import ReconcilerStore

/// The app API's refreshes (`GET /v1/purchases?…&refresh=if-stale|always`) for one app and
/// environment: Apple is read for the customers the key names before the answer, with Get
/// Transaction History from the stored revision and Get All Subscription Statuses only, applied
/// through the verified path of a run's phase 2 (``CustomerRead``). An unknown transaction ID is
/// looked up at Apple; an `appAccountToken` or `appUserId` the store does not know is not
/// (nothing names its customer to Apple).
///
/// A refresh is not a run: the app asks for it as often as its users open it, and a run's record
/// (its row in `status`, its report and queue) would cost more than the read. Its writes carry the
/// data path's source (`transaction_history`, `status_refresh`) in the change feed with no run,
/// it stamps the customer's `checkedAt`, and what fails verification goes to the quarantine.
///
/// The answer never waits longer than the query's `timeout`, judged on the configured clock: past
/// it (Apple slow, or the budget spent so the requests wait for their turn) the stored state is
/// answered with `fresh: false` while the refresh goes on in the background; each purchase is
/// `fresh: true` when Apple answered for this request.
///
/// Its requests come out of the app's shared budget (``SharedBudget``), joined only while it has
/// refreshes (and left after ``Configuration/idleBeforeLeaving`` without any), each endpoint capped
/// at `appApi.refreshRateLimit` (default 10% of the app's budget), so a run beside it keeps the rest.
///
/// ```swift
/// let refresher = AppRefresher(scope: target.scope, database: database, verifier: verifier, client: client, origins: origins, budget: budget)
/// let purchases = try await refresher.purchases(query, at: .now)
/// ```
package final class AppRefresher: Sendable {
    package struct Configuration: Sendable {
        /// The clock the answer's deadline is judged on (tests move it).
        package var clock: any MonotonicClock
        /// Requests per second the refreshes may take of each endpoint (`appApi.refreshRateLimit`);
        /// `nil`: ``defaultShare`` of the app's budget.
        package var refreshRateLimit: Double?
        /// How long the shared budget is kept without a refresh before it is left.
        package var idleBeforeLeaving: Duration

        package init(clock: any MonotonicClock = .system, refreshRateLimit: Double? = nil, idleBeforeLeaving: Duration = .seconds(30)) {
            self.clock = clock
            self.refreshRateLimit = refreshRateLimit
            self.idleBeforeLeaving = idleBeforeLeaving
        }
    }

    /// The endpoints a refresh calls, and the app's consumption answers (`POST /v1/consumption/{transactionId}`).
    package static let endpoints: [AppStoreServerAPIEndpoint] = [
        .getTransactionHistory, .getAllSubscriptionStatuses, .sendConsumptionInformation,
    ]
    /// The refreshes' share of the app's budget when `refreshRateLimit` is not set.
    package static let defaultShare = 0.1

    package let configuration: Configuration
    package let scope: AppScope
    let database: Database
    let verifier: SignedDataVerifier
    let client: AppStoreServerAPIClient
    /// Writes what a refresh reads, as the webhook's handler would.
    let handler: NotificationHandler
    /// Where the key's settings came from, for the hints of Apple's refusals.
    let origins: SettingOrigins
    let budget: BudgetLease

    /// - Parameters:
    ///   - client: the app's App Store Server API client; build it with ``requestsPerSecond(budget:refreshRateLimit:)``
    ///     so it never spends more than the cap, even alone.
    ///   - budget: the app's request budget (the same in every process of the app).
    package convenience init(
        configuration: Configuration = .init(), scope: AppScope, database: Database, verifier: SignedDataVerifier,
        client: AppStoreServerAPIClient, origins: SettingOrigins, budget: RequestBudget
    ) {
        let shared = SharedBudget(
            configuration: .init(claims: Self.claims(budget: budget, refreshRateLimit: configuration.refreshRateLimit)), database: database,
            limiter: client.rateLimiter, app: scope.target)
        self.init(
            configuration: configuration, scope: scope, database: database, verifier: verifier, client: client, origins: origins,
            lease: BudgetLease(budget: shared, idle: configuration.idleBeforeLeaving))
    }

    /// - Parameters:
    ///   - client: the app's App Store Server API client, shared with the process's other callers of the app (one rate limiter).
    ///   - lease: the process's lease on the app's shared budget, shared with the same callers; its
    ///     claims include ``claims(budget:refreshRateLimit:)``.
    package init(
        configuration: Configuration = .init(), scope: AppScope, database: Database, verifier: SignedDataVerifier,
        client: AppStoreServerAPIClient, origins: SettingOrigins, lease: BudgetLease
    ) {
        self.configuration = configuration
        self.origins = origins
        self.scope = scope
        self.database = database
        self.verifier = verifier
        self.client = client
        self.handler = NotificationHandler(scope: scope, verifier: verifier, database: database)
        self.budget = lease
    }

    /// What the refreshes declare to the app's other processes: each endpoint's app budget, capped.
    package static func claims(budget: RequestBudget, refreshRateLimit: Double?) -> [AppStoreServerAPIEndpoint: BudgetAllocation.Claim] {
        requestsPerSecond(budget: budget, refreshRateLimit: refreshRateLimit).reduce(into: [:]) { claims, entry in
            claims[entry.key] = .init(appBudget: budget.app[entry.key] ?? entry.value, cap: entry.value)
        }
    }

    /// The refreshes' cap on each endpoint they call: `refreshRateLimit` (at most the app's budget), or 10% of the app's budget.
    package static func requestsPerSecond(budget: RequestBudget, refreshRateLimit: Double?) -> [AppStoreServerAPIEndpoint: Double] {
        var caps: [AppStoreServerAPIEndpoint: Double] = [:]
        for endpoint in endpoints {
            guard let app = budget.app[endpoint] else { continue }
            caps[endpoint] = min(refreshRateLimit ?? app * defaultShare, app, budget.cap ?? .infinity)
        }
        return caps
    }

    /// The purchases `query` names, after reading Apple when its `refresh` asks for it and the
    /// answer came within its `timeout`; see ``AppRefresher``.
    package func purchases(_ query: PurchaseQuery, at now: @escaping @Sendable () -> Timestamp) async throws -> [AppPurchase] {
        let stored = AppPurchases(scope: scope, database: database)
        let before = try await stored.stored(query.key, at: now())
        guard let refresh = query.refresh, Self.isStale(before, refresh, now: now()), let anchors = try await customers(query.key, stored: before)
        else { return before }
        let work = Task { await self.refresh(anchors) }
        guard await Self.answered(work, within: query.timeout, clock: configuration.clock) else { return before }
        return try await stored.stored(query.key, at: now()).map { AppPurchase(state: $0.state, checkedAt: $0.checkedAt, fresh: true) }
    }

    /// The customers Apple is asked about for `key` (the transaction ID each is read by); `nil`
    /// when Apple is not asked: an app account token or app user ID the store does not know names
    /// no customer to Apple, while a transaction ID it does not know is Apple's to look up.
    func customers(_ key: PurchaseQuery.Key, stored: [AppPurchase]) async throws -> [String]? {
        guard !stored.isEmpty else {
            switch key {
            case .originalTransactionId(let id), .transactionId(let id): return [id]
            case .appAccountToken, .appUserId: return nil
            }
        }
        let (store, originals) = (handler.store, stored.map(\.state.originalTransactionId))
        return try await database.transaction { transaction in try await store.customers.anchors(of: originals, on: transaction) }.sorted()
    }

    /// Whether `refresh` asks Apple given what is stored: always, or when a purchase's customer was
    /// checked longer than `maxAge` ago or never (or nothing is stored).
    static func isStale(_ stored: [AppPurchase], _ refresh: PurchaseQuery.Refresh, now: Timestamp) -> Bool {
        switch refresh {
        case .always: return true
        case .ifStale(let maxAge):
            return stored.isEmpty || stored.contains { purchase in purchase.checkedAt.map { now - $0 > maxAge } ?? true }
        }
    }

    /// Reads Apple for each customer, one after the other, inside the shared budget; `true` when
    /// Apple answered every request (a transaction ID it does not know is an answer: nothing).
    func refresh(_ anchors: [String]) async -> Bool {
        do {
            try await budget.begin()
        } catch {
            database.logger.info(
                "app API refresh could not join the shared budget; the stored state was answered",
                metadata: ["app": "\(scope.target)", "error": "\(error)"])
            return false
        }
        let read = CustomerRead(
            handler: handler, client: client, tally: VerificationTally(), logger: database.logger,
            recording: RefreshRecording(ledger: RunLedger(database: database), app: scope.target))
        var answered = true
        for anchor in anchors {
            do {
                _ = try await read.read(anchor: anchor)
            } catch let error as AppStoreServerAPIError where error.details.errorCode == .transactionIdNotFound {
                continue
            } catch {
                database.logger.info(
                    "app API refresh did not complete; the stored state was answered",
                    metadata: ["app": "\(scope.target)", "customer": "\(anchor)", "error": "\(error)"])
                answered = false
                break
            }
        }
        await budget.end()
        return answered
    }

    /// Whether `work` ended with Apple's answer before `timeout` passed on `clock`; the work goes on past it.
    static func answered(_ work: Task<Bool, Never>, within timeout: Duration, clock: any MonotonicClock) async -> Bool {
        let (outcomes, continuation) = AsyncStream<Bool>.makeStream()
        let waiting = Task { continuation.yield(await work.value) }
        let deadline = Task {
            try? await clock.sleep(for: timeout)
            continuation.yield(false)
        }
        var iterator = outcomes.makeAsyncIterator()
        let outcome = await iterator.next() ?? false
        continuation.finish()
        deadline.cancel()
        _ = waiting
        return outcome
    }

    /// The app's answer to its consumption request, sent at once as `app` inside the shared budget
    /// (``ConsumptionAppAnswer``); a budget that cannot be joined is `unreachable` (retry).
    package func answerConsumption(_ input: ConsumptionAnswers.Input) async -> ConsumptionAppAnswer {
        do {
            try await budget.begin()
        } catch {
            return .unreachable(detail: "the request budget shared with the app's other processes could not be joined; retry")
        }
        let answer = await ConsumptionAppAnswer.answer(input, app: scope.target, client: client, origins: origins, database: database)
        await budget.end()
        return answer
    }

    /// Leaves the shared budget now (tests; serve stops the lease itself on its shutdown).
    package func stop() async { await budget.stop() }
}

/// What a refresh records beside the purchases it writes: no run, so its rejections go to the
/// quarantine alone (`reconciler rejections` lists them).
struct RefreshRecording: CustomerRead.Recording {
    let ledger: RunLedger
    let app: AppTarget

    var runId: Int64? { nil }

    func record(
        anchor: String, changes: [PurchaseChange], rejections: [Rejection], completion: CustomerRead.Completion?, on transaction: DatabaseTransaction
    ) async throws -> [Rejection] {
        try await ledger.quarantine(rejections, runId: nil, app: app, dryRun: false, on: transaction)
    }

    func revisionReset(anchor: String) async throws {}
}
