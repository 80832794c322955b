import AppStoreServer
import CoreMetrics
import Foundation
import PostgresNIO
import Reconciler
import ReconcilerDomain
import ReconcilerMetrics
import TestSupport
import Testing

@testable import ReconcilerStore

/// The gauges the metrics read from the database, once and as `serve` refreshes them.
@Suite struct MetricsTests {
    /// Open consumption requests by time left at the moment the gauges are read (fixed here), and
    /// the soonest deadline; an expired request is not open, and with none open the deadline is 0.
    @Test func theConsumptionRequestGaugesCountOpenRequestsByTimeLeft() async throws {
        let app = try TestApp()
        try await TestDatabase.with { db in
            let metrics = MetricsRegistry(app: AppTarget(bundleId: TestApp.bundleId, environment: .production))
            var ledgerMetrics = LedgerMetrics(
                ledger: RunLedger(database: db.database), app: AppTarget(bundleId: TestApp.bundleId, environment: .production), registry: metrics)
            let moment: Int64 = app.start + 20 * 86_400_000
            ledgerMetrics.now = { moment }
            try await ledgerMetrics.refresh()
            var parsed = try PrometheusText(parsing: metrics.exposition())
            #expect(parsed.value("reconciler_consumption_requests_open", ["time_left": "under_2h"]) == 0)
            #expect(parsed.value("reconciler_consumption_request_next_deadline_timestamp_seconds") == 0)
            // Received live at these times before the moment: deadlines 1 h, 5 h and 11 h ahead, and one 1 h past.
            let handler = try app.handler(db)
            for (index, hoursAgo) in [11, 7, 1, 13].enumerated() {
                let signed = moment - Int64(hoursAgo) * 3_600_000
                let transaction = app.oneTime("93\(index)", purchaseDate: signed - 60_000, signedDate: signed)
                _ = try await handler.handle(
                    signedPayload: try app.notification(.consumptionRequest, signedDate: signed, transaction: transaction), source: .webhook)
            }
            try await ledgerMetrics.refresh()
            parsed = try PrometheusText(parsing: metrics.exposition())
            for (bucket, count) in [("under_2h", 1.0), ("2h_to_6h", 1.0), ("over_6h", 1.0)] {
                #expect(parsed.value("reconciler_consumption_requests_open", ["time_left": bucket]) == count, "\(bucket)")
            }
            #expect(parsed.value("reconciler_consumption_request_next_deadline_timestamp_seconds") == Double(moment + 3_600_000) / 1000)
        }
    }

    /// The quarantine, the last finished run and the newest live notification come from the
    /// database; the newest live notification only moves forward, whichever source feeds it.
    @Test func theLedgerGaugesComeFromTheDatabase() async throws {
        let app = try TestApp()
        try await TestDatabase.with { db in
            let metrics = MetricsRegistry(app: AppTarget(bundleId: TestApp.bundleId, environment: .production))
            // The webhook this process forwards to: its gauges read 0 before anything is queued.
            let ledgerMetrics = LedgerMetrics(
                ledger: RunLedger(database: db.database), app: AppTarget(bundleId: TestApp.bundleId, environment: .production),
                registry: metrics, forwardingTargets: [ForwardingTarget(url: "http://127.0.0.1:9/notifications")])
            try await ledgerMetrics.refresh()
            var parsed = try PrometheusText(parsing: metrics.exposition())
            #expect(parsed.value("reconciler_quarantined_payloads_unacknowledged") == 0)
            // Nothing finished and nothing received yet: absent, not 0 ("in 1970").
            #expect(parsed.samples("reconciler_last_finished_run_timestamp_seconds").isEmpty)
            #expect(parsed.samples("reconciler_webhook_last_notification_timestamp_seconds").isEmpty)
            #expect(parsed.value("reconciler_forward_queue_deliveries", ["status": "pending"]) == 0)
            #expect(parsed.value("reconciler_forward_queue_oldest_pending_timestamp_seconds") == 0)

            for (hash, bundle, acknowledged) in [
                ("a1", TestApp.bundleId, false), ("a2", TestApp.bundleId, false),
                ("a3", TestApp.bundleId, true), ("b1", "com.other", false),
            ] {
                try await db.execute(
                    """
                    INSERT INTO quarantined_payloads (payload_sha256, environment, bundle_id, source, reason, detail, signed_payload, acknowledged_at)
                    VALUES (\(hash), 'Production', \(bundle), 'notification_history', 'INVALID_SIGNATURE', 'test', 'x.y.z',
                            \(acknowledged ? Date() : nil))
                    """)
            }
            let finishedAt = Date(timeIntervalSince1970: 1_790_000_000.5)
            for (status, dryRun, finished) in [
                ("succeeded", false, finishedAt), ("succeeded", true, finishedAt.addingTimeInterval(60)),
                ("partial", false, finishedAt.addingTimeInterval(120)),
            ] {
                try await db.execute(
                    """
                    INSERT INTO reconcile_runs (kind, environment, bundle_id, window_start_ms, window_end_ms, status, phase, dry_run, finished_at)
                    VALUES ('scheduled', 'Production', \(TestApp.bundleId), 0, 1, \(status), 'done', \(dryRun), \(finished))
                    """)
            }
            let signedDate = Int64(Date().timeIntervalSince1970 * 1000) - 3_600_000
            let payload = try app.notification(
                .didRenew, signedDate: signedDate,
                transaction: app.subscription(original: "9300", period: 1, signedDate: signedDate))
            let queuedAfter = Date().timeIntervalSince1970 - 1
            _ = try await app.handler(db).handle(
                signedPayload: payload, source: .webhook,
                forwarding: .init(target: ForwardingTarget(url: "http://127.0.0.1:9/notifications")))

            try await ledgerMetrics.refresh()
            parsed = try PrometheusText(parsing: metrics.exposition())
            #expect(parsed.value("reconciler_quarantined_payloads_unacknowledged", ["bundle_id": TestApp.bundleId]) == 2)
            // The notification waits in the forwarding queue for the app's webhook.
            #expect(parsed.value("reconciler_forward_queue_deliveries", ["status": "pending"]) == 1)
            #expect(parsed.value("reconciler_forward_queue_deliveries", ["status": "failed"]) == 0)
            #expect((parsed.value("reconciler_forward_queue_oldest_pending_timestamp_seconds") ?? 0) > queuedAfter)
            #expect(parsed.value("reconciler_last_finished_run_timestamp_seconds") == 1_790_000_000.5)
            #expect(parsed.value("reconciler_webhook_last_notification_timestamp_seconds") == Double(signedDate) / 1000)

            // Delivered: the count comes from the counter migration 0009's triggers keep, not from the rows.
            try await db.execute("UPDATE forward_queue SET status = 'delivered', delivered_at = now(), attempts = 1")
            try await ledgerMetrics.refresh()
            parsed = try PrometheusText(parsing: metrics.exposition())
            #expect(parsed.value("reconciler_forward_queue_deliveries", ["status": "delivered"]) == 1)
            #expect(parsed.value("reconciler_forward_queue_deliveries", ["status": "pending"]) == 0)
            try await db.execute("DELETE FROM forward_queue")
            #expect(try await db.count("SELECT sum(delivered)::bigint FROM forward_queue_totals") == 0)

            // A notification this process stores moves it forward; the database's older value does not move it back.
            let received = Date().timeIntervalSince1970
            metrics.newestLiveNotification.advance(to: received)
            try await ledgerMetrics.refresh()
            parsed = try PrometheusText(parsing: metrics.exposition())
            #expect(parsed.value("reconciler_webhook_last_notification_timestamp_seconds") == received)
        }
    }

    /// Each app and environment's forwarding gauges count only its own deliveries, per webhook
    /// (`target`, the URL without credentials or query), so one app's failing handler alerts for
    /// that app alone; the delivered counter is kept per app, environment and webhook.
    @Test func theForwardingGaugesCountEachAppsOwnDeliveriesPerWebhook() async throws {
        let (production, sandbox) = (try TestApp(), try TestApp(environment: .sandbox))
        try await TestDatabase.with { db in
            let (one, two) = ("https://hooks:pw@one.internal/apple?token=t", "https://two.internal/apple")
            let (oneLabel, twoLabel) = ("https://…@one.internal/apple?…", "https://two.internal/apple")
            let metrics = MetricsRegistry(app: AppTarget(bundleId: TestApp.bundleId, environment: .production))
            func refresh(_ app: TestApp) async throws {
                let target = AppTarget(bundleId: TestApp.bundleId, environment: app.environment)
                try await LedgerMetrics(
                    ledger: RunLedger(database: db.database), app: target, registry: metrics.scoped(target)
                ).refresh()
            }
            // The production app's handler refuses everything: its two deliveries failed for good.
            let failing = try await production.recordForwarded(2, to: one, in: db, purchasePrefix: "one")
            try await db.execute("UPDATE forward_queue SET status = 'failed', attempts = 12 WHERE notification_uuid = ANY(\(failing))")
            // The sandbox's handler took one of its three.
            _ = try await sandbox.recordForwarded(3, to: two, in: db, purchasePrefix: "two")
            try await db.execute(
                """
                UPDATE forward_queue SET status = 'delivered', delivered_at = now(), attempts = 1
                WHERE notification_uuid = (SELECT min(notification_uuid) FROM forward_queue WHERE environment = 'Sandbox')
                """)
            for app in [production, sandbox] { try await refresh(app) }
            var parsed = try PrometheusText(parsing: metrics.exposition())
            func deliveries(_ environment: String, _ target: String, _ status: String) -> Double? {
                parsed.value(
                    "reconciler_forward_queue_deliveries",
                    ["environment": environment, "bundle_id": TestApp.bundleId, "target": target, "status": status])
            }
            #expect(deliveries("Production", oneLabel, "failed") == 2)
            #expect(deliveries("Production", oneLabel, "pending") == 0 && deliveries("Production", oneLabel, "delivered") == 0)
            #expect(deliveries("Sandbox", twoLabel, "failed") == 0)
            #expect(deliveries("Sandbox", twoLabel, "pending") == 2 && deliveries("Sandbox", twoLabel, "delivered") == 1)
            // Neither names the other's webhook, and only the sandbox has deliveries waiting.
            #expect(deliveries("Production", twoLabel, "pending") == nil && deliveries("Sandbox", oneLabel, "failed") == nil)
            let oldest = "reconciler_forward_queue_oldest_pending_timestamp_seconds"
            #expect(parsed.value(oldest, ["environment": "Production", "target": oneLabel]) == 0)
            #expect((parsed.value(oldest, ["environment": "Sandbox", "target": twoLabel]) ?? 0) > 0)
            #expect(
                try await db.strings("SELECT environment || ' ' || target_redacted || ' ' || delivered FROM forward_queue_totals")
                    == ["Sandbox https://two.internal/apple 1"])

            // Pruned (deleted) and retried: the counter and the gauges follow, a webhook without rows reads 0.
            try await db.execute("DELETE FROM forward_queue WHERE status = 'delivered'")
            try await db.execute("UPDATE forward_queue SET status = 'pending', attempts = 0 WHERE status = 'failed'")
            for app in [production, sandbox] { try await refresh(app) }
            parsed = try PrometheusText(parsing: metrics.exposition())
            #expect(deliveries("Sandbox", twoLabel, "delivered") == 0 && deliveries("Production", oneLabel, "failed") == 0)
            #expect(deliveries("Production", oneLabel, "pending") == 2)
        }
    }

    /// `serve` reads the ledger gauges at start and then periodically, so an acknowledgement or
    /// another process's run shows without a restart.
    @Test func serveRefreshesTheLedgerGaugesPeriodically() async throws {
        try await TestDatabase.with { db in
            let metrics = MetricsRegistry(app: AppTarget(bundleId: TestApp.bundleId, environment: .production))
            let ledgerMetrics = LedgerMetrics(
                ledger: RunLedger(database: db.database), app: AppTarget(bundleId: TestApp.bundleId, environment: .production),
                registry: metrics, configuration: .init(interval: .milliseconds(100)))
            func quarantined() throws -> Double? {
                try PrometheusText(parsing: metrics.exposition()).value("reconciler_quarantined_payloads_unacknowledged")
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await ledgerMetrics.run() }
                defer { group.cancelAll() }
                try await eventually("the first refresh", timeout: .seconds(30)) { try quarantined() == 0 }
                try await db.execute(
                    """
                    INSERT INTO quarantined_payloads (payload_sha256, environment, bundle_id, source, reason, detail, signed_payload)
                    VALUES ('c1', 'Production', \(TestApp.bundleId), 'transaction_history', 'INVALID_CHAIN', 'test', 'x.y.z')
                    """)
                try await eventually("the quarantined payload", timeout: .seconds(30)) { try quarantined() == 1 }
                try await db.execute("UPDATE quarantined_payloads SET acknowledged_at = now()")
                try await eventually("the acknowledgement", timeout: .seconds(30)) { try quarantined() == 0 }
                let failures = try PrometheusText(parsing: metrics.exposition()).value("reconciler_ledger_refresh_failures_total")
                #expect(failures == 0)
            }
        }
    }

}
