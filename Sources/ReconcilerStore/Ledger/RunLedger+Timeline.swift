import AppStoreServer
package import Foundation
import PostgresNIO
package import ReconcilerDomain
import ReconcilerShared

/// A run over time, for the incident report page: its API requests per endpoint per second (each
/// process writes its own share) and the buckets ``RunTimeline`` is drawn from, aggregated here in
/// SQL so that a run of 100,000 notifications reads a few hundred rows.
extension RunLedger {
    /// Writes what one process did on a run since it started working on it (`timeline`, its share
    /// of the client's counters) and the budget it kept to. `worker` names that stint (see
    /// ``APITimelineRecorder``); its rows are replaced, so writing twice counts once.
    func recordAPITimeline(
        runId: Int64, worker: String, _ timeline: APIStatistics.Timeline,
        budget: [AppStoreServerAPIEndpoint: Double]
    ) async throws {
        struct Second: Encodable {
            var endpoint: String
            var second: Int64
            var requests: Int
            var rate_limited: Int
            var retries: Int
        }
        struct Budget: Encodable {
            var endpoint: String
            var requests_per_second: Double
        }
        let seconds = timeline.entries.map {
            Second(
                endpoint: $0.endpoint, second: $0.second, requests: $0.counts.requests, rate_limited: $0.counts.rateLimited,
                retries: $0.counts.retries)
        }
        let budgets = try PurchaseStore.json(
            budget.map { Budget(endpoint: $0.key.name, requests_per_second: $0.value) }
                .sorted { $0.endpoint < $1.endpoint })
        // A day of three busy endpoints is a quarter of a million rows: a few statements of bounded size.
        let chunks = try stride(from: 0, to: seconds.count, by: 10_000).map {
            try PurchaseStore.json(Array(seconds[$0..<min($0 + 10_000, seconds.count)]))
        }
        try await read { [logger] transaction in
            for chunk in chunks {
                try await transaction.query(
                    """
                    INSERT INTO run_api_seconds (run_id, worker, endpoint, second, requests, rate_limited, retries)
                    SELECT \(runId), \(worker), endpoint, second, requests, rate_limited, retries
                    FROM jsonb_to_recordset(\(chunk)::jsonb) AS r (endpoint text, second bigint, requests integer, rate_limited integer, retries integer)
                    ORDER BY endpoint, second
                    ON CONFLICT (run_id, worker, endpoint, second) DO UPDATE SET requests = EXCLUDED.requests,
                        rate_limited = EXCLUDED.rate_limited, retries = EXCLUDED.retries
                    """, logger: logger)
            }
            try await transaction.query(
                """
                INSERT INTO run_api_budgets (run_id, worker, endpoint, requests_per_second)
                SELECT \(runId), \(worker), endpoint, requests_per_second
                FROM jsonb_to_recordset(\(budgets)::jsonb) AS r (endpoint text, requests_per_second double precision)
                ON CONFLICT (run_id, worker, endpoint) DO UPDATE SET requests_per_second = EXCLUDED.requests_per_second
                """, logger: logger)
        }
    }

    /// The run over time: its recorded notifications by type in buckets of the window (by
    /// `signedDate`) and of the run's clock (by when each was applied), and its API requests per
    /// endpoint in buckets of the run's clock, every process's share summed.
    ///
    /// - Parameter until: the end of the run's clock when the run has not finished.
    package func timeline(run: RunRecord, until: Date = Date()) async throws -> RunTimeline {
        let runId = run.runId
        return try await read { [logger] transaction in
            var notificationExtent: (Int64?, Int64?, Int64?, Int64?) = (nil, nil, nil, nil)
            for try await row in try await transaction.query(
                """
                SELECT min(signed_date_ms), max(signed_date_ms), floor(extract(epoch FROM min(received_at)) * 1000)::bigint,
                       ceil(extract(epoch FROM max(received_at)) * 1000)::bigint
                FROM notifications WHERE run_id = \(runId)
                """, logger: logger
            ).decode((Int64?, Int64?, Int64?, Int64?).self) { notificationExtent = row }
            var apiExtent: (Int64?, Int64?) = (nil, nil)
            for try await row in try await transaction.query(
                "SELECT min(second), max(second) FROM run_api_seconds WHERE run_id = \(runId)", logger: logger
            ).decode((Int64?, Int64?).self) { apiExtent = row }

            let (firstSigned, lastSigned, firstApplied, lastApplied) = notificationExtent
            let (windowStart, windowEnd) = (run.window.start.millisecondsSince1970, run.window.end.millisecondsSince1970)
            let signedAxis = RunTimeline.Axis.rounded(
                start: min(windowStart, firstSigned ?? windowStart), end: max(windowEnd, (lastSigned ?? windowEnd) + 1), buckets: 120)
            let milliseconds = { (date: Date) in Int64((date.timeIntervalSince1970 * 1000).rounded(.down)) }
            let runStart = [milliseconds(run.startedAt), firstApplied, apiExtent.0.map { $0 * 1000 }].compactMap { $0 }.min()!
            let runEnd = [milliseconds(run.finishedAt ?? until), lastApplied.map { $0 + 1 }, apiExtent.1.map { ($0 + 1) * 1000 }].compactMap { $0 }
                .max()!
            let runAxis = RunTimeline.Axis.rounded(start: runStart, end: runEnd, buckets: 60, minimumBucket: 100)
            let apiAxis = RunTimeline.Axis.rounded(start: runStart, end: runEnd, buckets: 150, minimumBucket: 1000)

            var bySignedDate: [RunTimeline.NotificationBucket] = [], byAppliedTime: [RunTimeline.NotificationBucket] = []
            let notifications = try await transaction.query(
                """
                SELECT type_and_subtype, GROUPING(signed_bucket), COALESCE(signed_bucket, applied_bucket),
                       count(*) FILTER (WHERE outcome = 'applied'), count(*) FILTER (WHERE outcome = 'stale'),
                       count(*) FILTER (WHERE outcome = 'recorded')
                FROM (SELECT notification_type || COALESCE('/' || subtype, '') AS type_and_subtype, outcome,
                             (signed_date_ms - \(signedAxis.start)) / \(signedAxis.bucketMilliseconds) AS signed_bucket,
                             (floor(extract(epoch FROM received_at) * 1000)::bigint - \(runAxis.start)) / \(runAxis.bucketMilliseconds) AS applied_bucket
                      FROM notifications WHERE run_id = \(runId)) AS n
                GROUP BY GROUPING SETS ((type_and_subtype, signed_bucket), (type_and_subtype, applied_bucket))
                ORDER BY 2, 1, 3
                """, logger: logger)
            for try await (type, byApplied, bucket, applied, stale, recorded) in notifications.decode((String, Int32, Int64, Int, Int, Int).self) {
                let row = RunTimeline.NotificationBucket(
                    typeAndSubtype: type, bucket: Int(bucket), applied: applied, stale: stale, recorded: recorded)
                if byApplied == 0 { bySignedDate.append(row) } else { byAppliedTime.append(row) }
            }

            var api: [RunTimeline.APIBucket] = []
            let seconds = try await transaction.query(
                """
                SELECT endpoint, (second * 1000 - \(apiAxis.start)) / \(apiAxis.bucketMilliseconds) AS bucket,
                       sum(requests)::bigint, max(requests)::bigint, sum(rate_limited)::bigint, sum(retries)::bigint
                FROM (SELECT endpoint, second, sum(requests) AS requests, sum(rate_limited) AS rate_limited, sum(retries) AS retries
                      FROM run_api_seconds WHERE run_id = \(runId) GROUP BY endpoint, second) AS per_second
                GROUP BY endpoint, bucket ORDER BY endpoint, bucket
                """, logger: logger)
            for try await (endpoint, bucket, requests, busiest, rateLimited, retries) in seconds.decode((String, Int64, Int, Int, Int, Int).self) {
                api.append(
                    .init(
                        endpoint: endpoint, bucket: Int(bucket), requests: requests, busiestSecond: busiest, rateLimited: rateLimited,
                        retries: retries))
            }
            var budgets: [String: Double] = [:]
            for try await (endpoint, perSecond) in try await transaction.query(
                "SELECT endpoint, max(requests_per_second) FROM run_api_budgets WHERE run_id = \(runId) GROUP BY endpoint", logger: logger
            ).decode((String, Double).self) { budgets[endpoint] = perSecond }
            var processes = 0
            for try await count in try await transaction.query(
                """
                SELECT count(DISTINCT split_part(worker, '#', 1))::bigint
                FROM (SELECT worker FROM run_api_budgets WHERE run_id = \(runId) UNION SELECT worker FROM run_api_seconds WHERE run_id = \(runId)) AS w
                """, logger: logger
            ).decode(Int.self) { processes = count }
            return RunTimeline(
                signedAxis: signedAxis, bySignedDate: bySignedDate, runAxis: runAxis, byAppliedTime: byAppliedTime,
                apiAxis: apiAxis, api: api, apiBudgets: budgets, apiProcesses: processes)
        }
    }
}
