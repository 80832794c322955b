package import AppStoreServer

/// How the app's request budget is divided among its live processes (``SharedBudget``), as pure
/// functions: no database, no time.
///
/// Per endpoint, the app's budget is shared only by the live processes that use that endpoint. A
/// process's own cap (`--rate-limit`) limits that process alone, and what a capped process leaves
/// is shared by the others: every process gets the same share, except that none gets more than its
/// cap (max-min fairness). So adding a process never lowers what the app spends.
///
/// ```swift
/// BudgetAllocation.divide(40, caps: [40, 10, 10, 10])   // [10, 10, 10, 10]: a run and three workers capped at 10
/// BudgetAllocation.divide(40, caps: [nil, 5, 5, 5])     // [25, 5, 5, 5]: an uncapped run and three workers capped at 5
/// ```
package enum BudgetAllocation {
    /// What a process declares for one endpoint it calls.
    package struct Claim: Codable, Hashable, Sendable {
        /// The app's budget for the endpoint, requests per second: a setting of the app
        /// (`APP_STORE_RATE_LIMIT`), the same in every process of the app.
        package var appBudget: Double
        /// This process's own cap (`--rate-limit`), requests per second; `nil` when it has none.
        package var cap: Double?

        package init(appBudget: Double, cap: Double? = nil) {
            self.appBudget = appBudget
            self.cap = cap
        }
    }

    /// What a process declares: a claim for each endpoint it calls, by endpoint name.
    package typealias Declaration = [String: Claim]

    /// Divides `budget` among processes with these caps (`nil`: uncapped), in their order: the
    /// shares add up to the budget, or to the caps when they add up to less.
    package static func divide(_ budget: Double, caps: [Double?]) -> [Double] {
        var shares = [Double](repeating: 0, count: caps.count)
        var remaining = max(budget, 0)
        // The smallest caps first: a process capped below an even share takes its cap, and the
        // rest is divided evenly among the others.
        let order = caps.indices.sorted { (caps[$0] ?? .infinity) < (caps[$1] ?? .infinity) }
        for (position, index) in order.enumerated() {
            let even = remaining / Double(order.count - position)
            shares[index] = min(caps[index] ?? .infinity, even)
            remaining -= shares[index]
        }
        return shares
    }

    /// The share of each endpoint `process` declares, among the live `processes` (it included):
    /// the endpoint's budget (the smallest any of its users declares, should they differ) divided
    /// among the processes that declare the endpoint.
    package static func shares(of process: String, among processes: [String: Declaration]) -> [String: Double] {
        guard let own = processes[process] else { return [:] }
        var shares: [String: Double] = [:]
        for endpoint in own.keys {
            let users = processes.keys.filter { processes[$0]?[endpoint] != nil }.sorted()
            let claims = users.compactMap { processes[$0]?[endpoint] }
            let budget = claims.map(\.appBudget).min() ?? 0
            let divided = divide(budget, caps: claims.map(\.cap))
            if let index = users.firstIndex(of: process) { shares[endpoint] = divided[index] }
        }
        return shares
    }
}

/// The App Store request budget of one process: the app's budget per endpoint, the same in every
/// process of the app and environment, and this process's own cap. The app's budget is set in one
/// place (`APP_STORE_RATE_LIMIT`, read by the command line) for Get Notification History, Get
/// Transaction History and Get All Subscription Statuses; the other endpoints keep 80% of Apple's
/// limit.
///
/// ```swift
/// let budget = RequestBudget(environment: .production, appRequestsPerSecond: 40, cap: 10)
/// budget.alone[.getTransactionHistory]   // 10: what this process spends with no other process running
/// ```
package struct RequestBudget: Hashable, Sendable {
    /// The endpoints a recovery pages, which the app's budget setting (`APP_STORE_RATE_LIMIT`) sets.
    package static let settable: [AppStoreServerAPIEndpoint] = [.getNotificationHistory, .getTransactionHistory, .getAllSubscriptionStatuses]

    /// The app's budget, requests per second per endpoint.
    package var app: [AppStoreServerAPIEndpoint: Double]
    /// This process's own cap on every endpoint, requests per second (`--rate-limit`).
    package var cap: Double?

    /// - Parameters:
    ///   - appRequestsPerSecond: the app's budget for the endpoints in ``settable``; by default 80%
    ///     of Apple's limit, as for the others.
    ///   - cap: this process's own cap, `nil` for none.
    package init(environment: AppStoreEnvironment, appRequestsPerSecond: Double? = nil, cap: Double? = nil) {
        var app = RateLimiter.defaultBudget(environment: environment)
        if let appRequestsPerSecond {
            for endpoint in Self.settable { app[endpoint] = appRequestsPerSecond }
        }
        self.app = app
        self.cap = cap
    }

    /// What this process spends on each endpoint when it is the only process of the app.
    package var alone: [AppStoreServerAPIEndpoint: Double] { app.mapValues { min($0, cap ?? $0) } }

    /// What this process declares to the others for the endpoints it calls.
    package func claims(_ endpoints: some Sequence<AppStoreServerAPIEndpoint>) -> [AppStoreServerAPIEndpoint: BudgetAllocation.Claim] {
        var claims: [AppStoreServerAPIEndpoint: BudgetAllocation.Claim] = [:]
        for endpoint in endpoints {
            if let budget = app[endpoint] { claims[endpoint] = .init(appBudget: budget, cap: cap) }
        }
        return claims
    }
}
