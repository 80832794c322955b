/// What a deployment wants of the consumption requests of one app and environment
/// (`consumption:` in the configuration file, top level or per app; without a file,
/// `RECONCILER_CONSUMPTION_LIVE_REQUESTS`).
package struct ConsumptionSettings: Sendable, Hashable {
    /// Whether requests the live webhook received count as waiting for an answer.
    package enum LiveRequests: String, Sendable, Hashable, CaseIterable {
        /// Every request counts until it is answered, acked or past its deadline (the default: a
        /// request nobody else answers is not missed).
        case watch
        /// Requests the webhook received as Apple sent them (no outage) are the app's to answer
        /// (it has them forwarded, or receives them itself): `consumption list --open`, the gauges
        /// and the alert count only those a run recovered. `consumption list` still shows them.
        case ignore
    }

    package var liveRequests: LiveRequests
    /// How the reconciler answers the requests by itself (`consumption respond`, and with
    /// `automatic` each run); `nil`: no policy, answers only by `consumption send`.
    package var policy: ConsumptionPolicy?

    package init(liveRequests: LiveRequests = .watch, policy: ConsumptionPolicy? = nil) {
        self.liveRequests = liveRequests
        self.policy = policy
    }
}
