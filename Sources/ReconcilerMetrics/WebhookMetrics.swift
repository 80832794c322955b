package import AppStoreServer
import CoreMetrics
package import Foundation
import Reconciler
package import ReconcilerDomain

/// What the live webhook counts, in its process's ``MetricsRegistry``: notifications stored by
/// type and outcome, rejections by reason, store failures, and the newest live notification's time
/// (the "last received" health signal alerts watch).
///
/// ```swift
/// let metrics = WebhookMetrics(registry: MetricsRegistry(app: AppTarget(bundleId: "com.example.app", environment: .production)))
/// metrics.stored(result)                       // after the handler stored a notification
/// metrics.rejected(reason: "INVALID_SIGNATURE")
/// ```
package final class WebhookMetrics: Sendable {
    package let registry: MetricsRegistry
    private let storeFailures: CoreMetrics.Counter

    /// Reasons the webhook can reject a request with besides the verifier's.
    package static let requestRejections = ["BODY_TOO_LARGE", "MALFORMED_BODY"]

    package convenience init(registry: MetricsRegistry) {
        self.init(registry: registry, countsRejections: true)
    }

    private init(registry: MetricsRegistry, countsRejections: Bool) {
        self.registry = registry
        storeFailures = MetricDefinition.webhookStoreFailures.counter(in: registry)
        // Every known reason starts at 0, so `increase()` over the first rejection of a kind sees it.
        for reason in Self.requestRejections + VerificationError.Reason.allCases.map(\.rawValue) where countsRejections {
            _ = MetricDefinition.webhookRejected.counter([reason], in: registry)
        }
        // Quarantined notifications from 0 under each app served (and under none, for those whose app
        // cannot be read), so `increase()` sees the first one after a start.
        for reason in [VerificationError.Reason.invalidPayload, .missingSignedDate] {
            _ = MetricDefinition.webhookQuarantined.counter([reason.rawValue], in: registry)
        }
        // Counted for the process, not under the app they name (anyone can post them), and from 0.
        if countsRejections {
            _ = MetricDefinition.webhookForeignApp.counter(in: registry)
            _ = MetricDefinition.webhookReplayed.counter(in: registry)
        }
    }

    /// The counters of another app and environment the webhook serves, in the same registry.
    /// Rejections are counted before a payload is known to belong to any app, so only here.
    package func scoped(bundleId: String?, environment: AppStoreEnvironment?) -> WebhookMetrics {
        let scoped = registry.scoped(bundleId: bundleId, environment: environment)
        return scoped === registry ? self : WebhookMetrics(registry: scoped, countsRejections: false)
    }

    /// The handler stored a notification (a duplicate included: Apple delivered it again).
    package func stored(_ result: HandlingResult, at date: Date = Date()) {
        MetricDefinition.webhookNotifications.counter([result.typeAndSubtype, result.outcome.rawValue], in: registry).increment()
        registry.newestLiveNotification.advance(to: date.timeIntervalSince1970)
    }

    package func rejected(reason: String) {
        MetricDefinition.webhookRejected.counter([reason], in: registry).increment()
    }

    /// An authentic notification named an app the deployment knows in an environment the
    /// configuration does not serve (this registry is scoped to the app it named).
    package func unconfiguredApp() {
        MetricDefinition.webhookUnconfiguredApp.counter(in: registry).increment()
    }

    /// An authentic, recent notification of an app the deployment does not know, or a TEST
    /// notification of an app or environment it does not serve (counted for the process).
    package func foreignApp() {
        MetricDefinition.webhookForeignApp.counter(in: registry).increment()
    }

    /// An authentic notification of an app or environment the deployment does not serve, too old
    /// to be Apple's delivery (counted for the process).
    package func replayed() {
        MetricDefinition.webhookReplayed.counter(in: registry).increment()
    }

    /// An authentic notification that did not decode was quarantined (this registry is scoped to
    /// the app it names, or to none when that cannot be read).
    package func quarantined(reason: String) {
        MetricDefinition.webhookQuarantined.counter([reason], in: registry).increment()
    }

    package func storeFailed() {
        storeFailures.increment()
    }
}
