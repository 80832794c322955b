import ReconcilerDomain
import ReconcilerShared

/// What the deployment wants of its consumption requests, from the environment, for the one app
/// of the `APP_STORE_*` variables: RECONCILER_CONSUMPTION_LIVE_REQUESTS (`watch`, the default, or
/// `ignore`). A configuration file says it with `consumption.liveRequests`.
enum ConsumptionOptions {
    static let liveRequestsVariable = "RECONCILER_CONSUMPTION_LIVE_REQUESTS"

    static func settings() throws -> ConsumptionSettings {
        guard let text = Env.value("RECONCILER_CONSUMPTION_LIVE_REQUESTS") else { return ConsumptionSettings() }
        guard let live = ConsumptionSettings.LiveRequests(rawValue: text.lowercased()) else {
            throw ReconcilerError.configuration("\(liveRequestsVariable): \(text) is not watch or ignore")
        }
        return ConsumptionSettings(liveRequests: live)
    }
}
