/// How a run was asked to work; stored with it so a resumed run keeps its plan.
package struct RunOptions: Sendable, Codable, Hashable {
    package var planner: ReplayPlanner.Configuration
    /// Phase 2 also checks every known customer, not only those at risk.
    package var allCustomers: Bool
    /// Phase 2 also calls Get All Subscription Statuses (replayed notifications are snapshots).
    package var refreshStatus: Bool
    /// The app's own webhook: each notification the run records for the first time that Apple did
    /// not deliver is queued for it. Its id and redacted URL only: the URL comes from the
    /// configuration of the process that delivers.
    package var forwardTo: ForwardingTarget?
    /// A repair: the customer it was asked for, as the command line named it (`order-id MQ5Q7X2ZYB`).
    package var repairOf: String?

    package init(
        planner: ReplayPlanner.Configuration = .init(), allCustomers: Bool = false, refreshStatus: Bool = false, forwardTo: ForwardingTarget? = nil,
        repairOf: String? = nil
    ) {
        self.planner = planner
        self.allCustomers = allCustomers
        self.refreshStatus = refreshStatus
        self.forwardTo = forwardTo
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
            repairOf: try container.decodeIfPresent(String.self, forKey: .repairOf))
    }
}
