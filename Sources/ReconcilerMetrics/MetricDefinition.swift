/// One metric family the reconciler exposes: its Prometheus name, type, labels and help text, and
/// which process exposes it. ``all`` is the catalog: the registry takes each family's help text
/// from it, the README's metrics table lists exactly these names, and the alert rules and the
/// Grafana dashboard may query only these (tests check all three).
///
/// Every series also carries the process's constant labels, `environment` and `bundle_id`
/// (``MetricsRegistry/constantLabelNames``), so a `serve` and a `run` of the same app agree.
///
/// ```swift
/// let metrics = MetricsRegistry(app: AppTarget(bundleId: "com.example.app", environment: .production))
/// MetricDefinition.webhookNotifications.counter(["SUBSCRIBED/INITIAL_BUY", "applied"], in: metrics).increment()
/// ```
package struct MetricDefinition: Sendable, Hashable, CustomStringConvertible {
    package enum Kind: String, Sendable, Hashable {
        case counter, gauge
    }

    /// The `reconciler` commands whose output carries the family.
    package enum Process: String, Sendable, Hashable, CaseIterable {
        /// `reconciler serve`, `GET /metrics`.
        case serve
        /// `reconciler run --metrics-file`, node_exporter's textfile collector.
        case run
    }

    package var name: String
    package var kind: Kind
    /// The family's own labels, after the constant ones, in this order.
    package var labels: [String]
    package var help: String
    package var processes: Set<Process>

    package init(_ name: String, _ kind: Kind, labels: [String] = [], help: String, processes: Set<Process>) {
        self.name = name
        self.kind = kind
        self.labels = labels
        self.help = help
        self.processes = processes
    }

    package var description: String { name }
}

extension MetricDefinition {
    // MARK: serve: the live webhook

    package static let webhookNotifications = MetricDefinition(
        "reconciler_webhook_notifications_total", .counter, labels: ["type", "outcome"],
        help: "Notifications the webhook stored, by TYPE/SUBTYPE and outcome (applied, stale, recorded, duplicate).",
        processes: [.serve])
    package static let webhookRejected = MetricDefinition(
        "reconciler_webhook_rejected_total", .counter, labels: ["reason"],
        help: "Requests the webhook rejected (400 or 413), by reason; nothing was stored.",
        processes: [.serve])
    package static let webhookUnconfiguredApp = MetricDefinition(
        "reconciler_webhook_unconfigured_app_total", .counter,
        help: "Authentic notifications for an app the deployment knows (configured, in another environment or with another "
            + "app Apple ID, or listed in knownApps) in an environment the configuration does not name (503 APP_NOT_CONFIGURED; "
            + "not stored, Apple delivers them again), by the app and environment they name; TEST notifications are not counted here.",
        processes: [.serve])
    package static let webhookForeignApp = MetricDefinition(
        "reconciler_webhook_foreign_app_total", .counter,
        help: "Authentic notifications, signed in the last 7 days, of an app the deployment does not know, and TEST notifications "
            + "of any app or environment it does not serve (503 APP_NOT_CONFIGURED, not stored): someone else's; not labelled "
            + "with the app they name.",
        processes: [.serve])
    package static let webhookReplayed = MetricDefinition(
        "reconciler_webhook_replayed_total", .counter,
        help: "Authentic notifications of an app or environment the deployment does not serve, signed more than 7 days ago: "
            + "not Apple's delivery (Apple's last retry comes about 157 hours after the first attempt) but a copy posted again "
            + "(400 NOTIFICATION_TOO_OLD, not stored); not labelled with the app they name.",
        processes: [.serve])
    package static let webhookQuarantined = MetricDefinition(
        "reconciler_webhook_quarantined_total", .counter, labels: ["reason"],
        help: "Authentic notifications (signature and chain verified) the webhook could not decode, by reason (INVALID_PAYLOAD, "
            + "MISSING_SIGNED_DATE): quarantined with their exact bytes and answered 200, under the app and environment they name "
            + "('' when unreadable); `reconciler rejections --retry` applies them after an upgrade.",
        processes: [.serve])
    package static let webhookStoreFailures = MetricDefinition(
        "reconciler_webhook_store_failures_total", .counter,
        help: "Notifications the webhook could not store because the database failed (503; Apple retries them).",
        processes: [.serve])
    package static let appApiUnauthorized = MetricDefinition(
        "reconciler_app_api_unauthorized_total", .counter,
        help: "App API requests refused with 401: no Authorization: Bearer header, or a token appApi.tokenFile does not list "
            + "(the token is never recorded).",
        processes: [.serve])
    /// The "last received" health signal.
    package static let webhookLastNotification = MetricDefinition(
        "reconciler_webhook_last_notification_timestamp_seconds", .gauge,
        help: "The newest live notification: the newest signedDate the webhook stored, per the database, "
            + "or when this serve process last stored one, whichever is later.",
        processes: [.serve, .run])

    // MARK: both: the ledger, read from the database

    package static let quarantineUnacknowledged = MetricDefinition(
        "reconciler_quarantined_payloads_unacknowledged", .gauge,
        help: "Quarantined payloads (signed values that failed verification) nobody acknowledged yet (reconciler rejections --ack).",
        processes: [.serve, .run])
    package static let lastFinishedRun = MetricDefinition(
        "reconciler_last_finished_run_timestamp_seconds", .gauge,
        help: "When the newest finished run (succeeded or succeeded_with_rejections, not a dry run, any kind but repair) finished.",
        processes: [.serve, .run])
    package static let givenUpUnacknowledged = MetricDefinition(
        "reconciler_given_up_unacknowledged", .gauge, labels: ["kind"],
        help: "Customers and shards runs gave up on (Apple refused them, or they failed in --give-up-after attempts in a row) "
            + "nobody acknowledged yet (reconciler rejections --ack), by kind (customer, shard).",
        processes: [.serve, .run])
    package static let scheduleUnfinishedWindows = MetricDefinition(
        "reconciler_schedule_unfinished_windows", .gauge,
        help: "Scheduled windows (run --since-last) not finished yet; every run --since-last retries them before its newest window.",
        processes: [.serve, .run])
    package static let scheduleOldestUnfinishedWindowStart = MetricDefinition(
        "reconciler_schedule_oldest_unfinished_window_start_timestamp_seconds", .gauge,
        help: "Start of the oldest unfinished scheduled window; 0 when none. It is lost once it leaves Apple's retention.",
        processes: [.serve, .run])
    package static let ledgerRefreshFailures = MetricDefinition(
        "reconciler_ledger_refresh_failures_total", .counter,
        help: "Periodic database reads for the ledger gauges that failed; the gauges keep their last value.",
        processes: [.serve])
    package static let forwardQueueDeliveries = MetricDefinition(
        "reconciler_forward_queue_deliveries", .gauge, labels: ["target", "status"],
        help: "Deliveries of the app's notifications to its own webhook in the forwarding queue, by webhook (target: its URL "
            + "without credentials or query) and status: pending (waiting or being sent), failed (out of attempts; "
            + "reconciler forward --retry-failed), delivered (the app answered 2xx).",
        processes: [.serve, .run])
    package static let forwardQueueOldestPending = MetricDefinition(
        "reconciler_forward_queue_oldest_pending_timestamp_seconds", .gauge, labels: ["target"],
        help: "When the oldest delivery of the app's notifications still waiting for the webhook (target) was queued; 0 when none waits.",
        processes: [.serve, .run])

    package static let consumptionRequestsOpen = MetricDefinition(
        "reconciler_consumption_requests_open", .gauge, labels: ["time_left"],
        help: "Consumption requests without an answer or an ack and before their deadline (12 hours after Apple first sent them), "
            + "by time left: under_2h, 2h_to_6h, over_6h (reconciler consumption list --open); with consumption.liveRequests: ignore, "
            + "only those a run recovered.",
        processes: [.serve, .run])
    package static let consumptionRequestNextDeadline = MetricDefinition(
        "reconciler_consumption_request_next_deadline_timestamp_seconds", .gauge,
        help: "The soonest deadline of a consumption request without an answer or an ack and before its deadline; 0 when none.",
        processes: [.serve, .run])

    // MARK: run: the last invocation, for node_exporter's textfile collector

    package static let runExitCode = MetricDefinition(
        "reconciler_run_exit_code", .gauge, labels: ["kind"],
        help: "Exit code of the last run invocation: 0 done, 4 done but needs a person, 2 partial or interrupted, 1 configuration error.",
        processes: [.run])
    package static let runEnd = MetricDefinition(
        "reconciler_run_end_timestamp_seconds", .gauge, labels: ["kind"],
        help: "When the last run invocation ended, whatever its outcome.",
        processes: [.run])
    package static let runStatus = MetricDefinition(
        "reconciler_run_status", .gauge, labels: ["kind", "status"],
        help: "1 for the status of the last run's report, 0 for the other statuses.",
        processes: [.run])
    package static let runDryRun = MetricDefinition(
        "reconciler_run_dry_run", .gauge,
        help: "1 when the last run was a dry run (it changed nothing).",
        processes: [.run])
    package static let runDuration = MetricDefinition(
        "reconciler_run_duration_seconds", .gauge,
        help: "Duration of the last run.",
        processes: [.run])
    package static let runUrgentRecovery = MetricDefinition(
        "reconciler_run_urgent_recovery_seconds", .gauge,
        help: "When the last run applied its last new DID_RENEW or EXPIRED notification, in seconds after it started (absent when there was none).",
        processes: [.run])
    package static let runWindowStart = MetricDefinition(
        "reconciler_run_window_start_timestamp_seconds", .gauge,
        help: "Start of the last run's window.",
        processes: [.run])
    package static let runWindowEnd = MetricDefinition(
        "reconciler_run_window_end_timestamp_seconds", .gauge,
        help: "End of the last run's window.",
        processes: [.run])
    package static let runNotifications = MetricDefinition(
        "reconciler_run_notifications", .gauge, labels: ["type", "outcome"],
        help: "Notifications the last run saw, by TYPE/SUBTYPE and outcome (applied, stale, recorded, duplicate, rejected).",
        processes: [.run])
    package static let runConsumptionRequests = MetricDefinition(
        "reconciler_run_consumption_requests", .gauge, labels: ["state"],
        help: "Consumption requests the last run recovered, by state when it ended: open, expired (past the deadline "
            + "without an answer), answered, acked (needs nothing more: reconciler consumption ack). They never change the run's exit code.",
        processes: [.run])
    package static let runPurchasesChanged = MetricDefinition(
        "reconciler_run_purchases_changed", .gauge,
        help: "Purchases whose exported state the last run changed.",
        processes: [.run])
    package static let runCustomersChecked = MetricDefinition(
        "reconciler_run_customers_checked", .gauge,
        help: "Customers the last run checked by transaction history.",
        processes: [.run])
    package static let runCustomersFailed = MetricDefinition(
        "reconciler_run_customers_failed", .gauge,
        help: "Customers the last run could not check.",
        processes: [.run])
    package static let runShardsFailed = MetricDefinition(
        "reconciler_run_shards_failed", .gauge,
        help: "Notification history shards the last run could not page.",
        processes: [.run])
    package static let runRejections = MetricDefinition(
        "reconciler_run_rejections", .gauge, labels: ["new"],
        help: "Signed values the last run met that failed verification: quarantined for the first time (new=\"true\") or already.",
        processes: [.run])
    package static let runAPIRequests = MetricDefinition(
        "reconciler_run_api_requests", .gauge,
        help: "App Store Server API requests of the last run, retries included.",
        processes: [.run])
    package static let runAPIRetries = MetricDefinition(
        "reconciler_run_api_retries", .gauge,
        help: "Requests of the last run that repeated a failed one.",
        processes: [.run])
    package static let runAPIRateLimited = MetricDefinition(
        "reconciler_run_api_rate_limited", .gauge,
        help: "429 responses the last run received.",
        processes: [.run])
    package static let runAPIServerErrors = MetricDefinition(
        "reconciler_run_api_server_errors", .gauge,
        help: "5xx responses the last run received.",
        processes: [.run])
    package static let runAPITransportErrors = MetricDefinition(
        "reconciler_run_api_transport_errors", .gauge,
        help: "Connection failures, timeouts and truncated bodies the last run met.",
        processes: [.run])
    package static let runAPIFailedCalls = MetricDefinition(
        "reconciler_run_api_failed_calls", .gauge,
        help: "App Store Server API calls of the last run that failed for good (after their retries).",
        processes: [.run])

    /// Every family, in the order the README's table lists them.
    package static let all: [MetricDefinition] = [
        webhookNotifications, webhookRejected, webhookUnconfiguredApp, webhookForeignApp, webhookReplayed, webhookStoreFailures, webhookQuarantined,
        webhookLastNotification, appApiUnauthorized,
        quarantineUnacknowledged, givenUpUnacknowledged, scheduleUnfinishedWindows, scheduleOldestUnfinishedWindowStart, lastFinishedRun,
        ledgerRefreshFailures, forwardQueueDeliveries, forwardQueueOldestPending, consumptionRequestsOpen, consumptionRequestNextDeadline,
        runExitCode, runEnd, runStatus, runDryRun, runDuration, runUrgentRecovery, runWindowStart, runWindowEnd,
        runNotifications, runConsumptionRequests, runPurchasesChanged, runCustomersChecked, runCustomersFailed, runShardsFailed, runRejections,
        runAPIRequests, runAPIRetries, runAPIRateLimited, runAPIServerErrors, runAPITransportErrors, runAPIFailedCalls,
    ]

    /// The family named `name`, if it is one of ``all``.
    package static func named(_ name: String) -> MetricDefinition? { byName[name] }

    private static let byName: [String: MetricDefinition] = Dictionary(uniqueKeysWithValues: all.map { ($0.name, $0) })
}
