/// How a run was asked to work; stored with it so a resumed run keeps its plan.
package struct RunOptions: Sendable, Codable, Hashable {
    package var planner: ReplayPlanner.Configuration
    /// Phase 2 also checks every known customer, not only those at risk.
    package var allCustomers: Bool
    /// Phase 2 also calls Get All Subscription Statuses (replayed notifications are snapshots).
    package var refreshStatus: Bool
    /// The app's own webhooks, with the types each takes: each notification the run records for
    /// the first time that Apple did not deliver is queued for each that takes it. Their ids and
    /// redacted URLs only: the URLs come from the configuration of the process that delivers.
    package var forwardRoutes: [ForwardingRoute]
    /// The first of ``forwardRoutes``: what a run record of a version with one webhook per app holds
    /// (and what such a version reads back from this one's).
    package var forwardTo: ForwardingTarget? { forwardRoutes.first?.target }
    /// A repair: the customer it was asked for, as the command line named it (`order-id MQ5Q7X2ZYB`).
    package var repairOf: String?

    package init(
        planner: ReplayPlanner.Configuration = .init(), allCustomers: Bool = false, refreshStatus: Bool = false, forwardTo: ForwardingTarget? = nil,
        forwardRoutes: [ForwardingRoute]? = nil, repairOf: String? = nil
    ) {
        self.planner = planner
        self.allCustomers = allCustomers
        self.refreshStatus = refreshStatus
        self.forwardRoutes = forwardRoutes ?? forwardTo.map { [ForwardingRoute(target: $0)] } ?? []
        self.repairOf = repairOf
    }

    /// Options a row lacks take their defaults (a run recorded by an older version, or by hand).
    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            planner: try container.decodeIfPresent(ReplayPlanner.Configuration.self, forKey: .planner) ?? .init(),
            allCustomers: try container.decodeIfPresent(Bool.self, forKey: .allCustomers) ?? false,
            refreshStatus: try container.decodeIfPresent(Bool.self, forKey: .refreshStatus) ?? false,
            forwardTo: try container.decodeIfPresent(ForwardingTarget.self, forKey: .forwardTo),
            forwardRoutes: try container.decodeIfPresent([ForwardingRoute].self, forKey: .forwardRoutes),
            repairOf: try container.decodeIfPresent(String.self, forKey: .repairOf))
    }

    private enum CodingKeys: String, CodingKey { case planner, allCustomers, refreshStatus, forwardTo, forwardRoutes, repairOf }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(planner, forKey: .planner)
        try container.encode(allCustomers, forKey: .allCustomers)
        try container.encode(refreshStatus, forKey: .refreshStatus)
        try container.encodeIfPresent(forwardTo, forKey: .forwardTo)
        try container.encode(forwardRoutes, forKey: .forwardRoutes)
        try container.encodeIfPresent(repairOf, forKey: .repairOf)
    }
}
