import CoreMetrics

/// What the app API counts, in its process's ``MetricsRegistry``: requests refused for want of a
/// listed bearer token (never the token itself).
///
/// ```swift
/// let metrics = AppAPIMetrics(registry: registry)
/// metrics.unauthorized()
/// ```
package final class AppAPIMetrics: Sendable {
    private let unauthorizedRequests: CoreMetrics.Counter

    package init(registry: MetricsRegistry) {
        // Made now, so the family starts at 0 and `increase()` sees the first refusal.
        unauthorizedRequests = MetricDefinition.appApiUnauthorized.counter(in: registry)
    }

    /// A request was answered 401.
    package func unauthorized() {
        unauthorizedRequests.increment()
    }
}
