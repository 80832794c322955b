import AppStoreServer
import Foundation
import MockAppStore
import PostgresNIO
import ReconcilerDomain
import TestSupport
import Testing

@testable import Forwarder
@testable import Reconciler
@testable import ReconcilerStore

/// `forwardTo` as a list: an app and environment forwards to every target that receives it, each
/// with its own queue rows (and so its own forwarder, secret and `target` label); a target with
/// `types` gets only those. (The file's `environments` decide which targets an app and environment
/// gets: ConfigurationFileTests; what serve and run queue is what each handler is given here.)
@Suite(.serialized, .timeLimit(.minutes(5))) struct ForwardingRoutesTests {
    static func forwarder(url: String, db: TestDatabase) -> Forwarder {
        Forwarder(
            configuration: .init(url: ForwardingURL(url), concurrency: 2, initialBackoff: .milliseconds(50), pollInterval: .milliseconds(20)),
            database: db.database)
    }

    /// Production forwards to `live` and `refunds` (REFUND and one subtype of
    /// DID_CHANGE_RENEWAL_STATUS only), the sandbox to `staging` and `refunds`: each receiver gets
    /// exactly its own, once, and a delivery to one target does not count as the other's.
    @Test func twoTargetsFilteredByEnvironmentAndTypesGetOnlyTheirs() async throws {
        let (production, sandbox) = (try TestApp(environment: .production), try TestApp(environment: .sandbox))
        try await TestDatabase.with { db in
            try await AppWebhookReceiver.withRunning(.init()) { live, liveURL in
                try await AppWebhookReceiver.withRunning(.init()) { staging, stagingURL in
                    try await AppWebhookReceiver.withRunning(.init()) { refunds, refundsURL in
                        let refundTypes = NotificationTypeFilter(["REFUND", "DID_CHANGE_RENEWAL_STATUS/AUTO_RENEW_DISABLED"])
                        let refundRoute = ForwardingRoute(target: ForwardingTarget(url: refundsURL), types: refundTypes)
                        let routes: [AppStoreEnvironment: [ForwardingRoute]] = [
                            .production: [ForwardingRoute(target: ForwardingTarget(url: liveURL)), refundRoute],
                            .sandbox: [ForwardingRoute(target: ForwardingTarget(url: stagingURL)), refundRoute],
                        ]
                        var sent: [AppStoreEnvironment: [(uuid: String, type: NotificationTypeV2, subtype: Subtype?)]] = [:]
                        for app in [production, sandbox] {
                            let handler = try app.handler(db)
                            let kinds: [(NotificationTypeV2, Subtype?)] = [
                                (.subscribed, .initialBuy), (.refund, nil), (.didChangeRenewalStatus, .autoRenewDisabled),
                                (.didChangeRenewalStatus, .autoRenewEnabled),
                            ]
                            for (index, (type, subtype)) in kinds.enumerated() {
                                let uuid = UUID().uuidString.lowercased()
                                let signed = app.start + 86_400_000 + Int64(index)
                                let original = "routes-\(app.environment.rawValue)"
                                let payload = try app.notification(
                                    type, subtype, uuid: uuid, signedDate: signed,
                                    transaction: app.subscription(original: original, period: 0, signedDate: signed))
                                _ = try await handler.handle(
                                    signedPayload: payload, source: .webhook, forwarding: .init(routes: routes[app.environment] ?? []))
                                sent[app.environment, default: []].append((uuid, type, subtype))
                            }
                        }
                        for url in [liveURL, stagingURL, refundsURL] { _ = try await Self.forwarder(url: url, db: db).deliverDue() }
                        let once = { (uuids: [String]) in Dictionary(uniqueKeysWithValues: uuids.map { ($0, 1) }) }
                        #expect(live.statistics.acknowledged == once((sent[.production] ?? []).map(\.uuid)))
                        #expect(staging.statistics.acknowledged == once((sent[.sandbox] ?? []).map(\.uuid)))
                        let refundsOwn = (sent[.production] ?? []) + (sent[.sandbox] ?? [])
                        #expect(
                            refunds.statistics.acknowledged
                                == once(refundsOwn.filter { refundTypes.matches(type: $0.type.rawValue, subtype: $0.subtype?.rawValue) }.map(\.uuid)))
                        #expect(refunds.statistics.acknowledged.count == 4, "REFUND and AUTO_RENEW_DISABLED of both environments")
                        // Each target its own rows, and nothing waits.
                        #expect(try await db.count("SELECT count(*) FROM forward_queue") == 12)
                        #expect(try await db.count("SELECT count(*) FROM forward_queue WHERE status <> 'delivered'") == 0)
                    }
                }
            }
        }
    }
}
