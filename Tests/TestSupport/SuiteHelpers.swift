import AppStoreServer
import CoreMetrics
package import Logging
package import PostgresNIO
import Reconciler
package import ReconcilerMetrics
package import ReconcilerStore

/// What the change feed's suites share (the integration one, in process, and the end-to-end one,
/// through `reconciler changes`): live notifications of new purchases and the feed as a reader gets it.
///
/// ```swift
/// @Suite struct ChangeFeedTests: ChangeFeedTesting {
///     let app = try TestApp()
///     @Test func x() async throws { _ = try await handler.handle(signedPayload: try subscribed("order-1"), source: .webhook) }
/// }
/// ```
package protocol ChangeFeedTesting {
    var app: TestApp { get }
}

extension ChangeFeedTesting {
    /// When live notifications are signed: a day after the app's first purchases.
    package var t0: Int64 { app.start + 86_400_000 }

    package static var logger: Logger { TestDatabase.logger }

    /// A live SUBSCRIBED notification of a new purchase.
    package func subscribed(_ original: String, signedDate: Int64? = nil) throws -> String {
        let signed = signedDate ?? t0
        return try app.notification(
            .subscribed, .initialBuy, signedDate: signed,
            transaction: app.subscription(original: original, period: 0, signedDate: signed), status: .active)
    }

    /// What a reader of the feed gets now, after `position`.
    package static func feed(_ db: TestDatabase, after position: PurchaseStore.FeedPosition = .start) async throws -> [PurchaseStore.FeedChange] {
        let store = PurchaseStore(logger: logger)
        return try await db.database.transaction { try await store.changes(after: position, limit: 10_000, on: $0) }.changes
    }

    package static func execute(_ sql: PostgresQuery, on connection: PostgresConnection) async throws {
        for try await _ in try await connection.query(sql, logger: logger) {}
    }
}

/// Passwords the secrets suites look for in output: two distinctive halves around the characters
/// that break URL parsers, so a test sees a partial leak too: neither half may appear.
package protocol PasswordLeakTesting {}

extension PasswordLeakTesting {
    package static var halves: (String, String) { ("QXSECRETA", "QXSECRETB") }

    package static func leaks(_ text: String) -> Bool { text.contains(halves.0) || text.contains(halves.1) }

    package static func secret(_ middle: String) -> String { halves.0 + middle + halves.1 }
}

/// What the metrics suites share.
package protocol MetricsTesting {}

extension MetricsTesting {
    /// A registry holding every family of the catalog once (label values "x"), and its exposition.
    package static func everyMetric() -> (MetricsRegistry, String) {
        let metrics = MetricsRegistry(app: AppTarget(bundleId: "com.example.app", environment: .production))
        for definition in MetricDefinition.all {
            let values = definition.labels.map { _ in "x" }
            switch definition.kind {
            case .counter: definition.counter(values, in: metrics).increment()
            case .gauge: definition.gauge(values, in: metrics).record(1)
            }
        }
        return (metrics, metrics.exposition())
    }
}
