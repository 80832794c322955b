import AppStoreServer
import Foundation
import PostgresNIO
import ReconcilerDomain
import ReconcilerShared
import TestSupport
import Testing

@testable import Reconciler
@testable import ReconcilerStore

/// The incident report page's timeline, aggregated by the ledger in PostgreSQL.
@Suite(.serialized) struct ReportPageTests {
    /// The ledger aggregates in PostgreSQL: 10,000 notifications come back as a few hundred
    /// buckets, each notification in the right one on both axes; every process's requests are
    /// summed per second, a stint written twice counts once, and other runs stay out.
    @Test func theLedgerAggregatesTheTimelineInPostgreSQL() async throws {
        try await TestDatabase.with { db in
            let ledger = RunLedger(database: db.database)
            let windowStart: Int64 = 1_800_000_000_000, windowEnd = windowStart + 3 * 3_600_000
            func createRun() async throws -> RunRecord {
                try await ledger.createRun(
                    kind: .manual, app: AppTarget(bundleId: "com.example", environment: .production),
                    window: TimeWindow(milliseconds: windowStart..<windowEnd),
                    dryRun: false, options: .init(), shards: [], holder: "test")
            }
            let created = try await createRun(), other = try await createRun()
            // The run's clock: 200 s from a round second; notifications applied every 10 ms from its start.
            try await db.execute(
                """
                UPDATE reconcile_runs SET started_at = to_timestamp(1900000000), finished_at = to_timestamp(1900000200) WHERE run_id = \(created.runId)
                """)
            try await db.execute(
                """
                INSERT INTO notifications (notification_uuid, notification_type, subtype, signed_date_ms, bundle_id, environment, signed_payload,
                                           source, run_id, outcome, received_at)
                SELECT 'n' || i, CASE WHEN i % 4 = 0 THEN 'DID_RENEW' ELSE 'REFUND' END, CASE WHEN i % 8 = 4 THEN 'BILLING_RECOVERY' END,
                       \(windowStart) + i * 1000, 'com.example', 'Production', 'x', 'history', \(created.runId),
                       CASE WHEN i % 10 = 0 THEN 'stale' ELSE 'applied' END, to_timestamp(1900000000) + i * interval '10 milliseconds'
                FROM generate_series(0, 9999) AS i
                """)
            try await db.execute(
                """
                INSERT INTO notifications (notification_uuid, notification_type, signed_date_ms, bundle_id, environment, signed_payload, source,
                                           run_id, outcome)
                VALUES ('other-run', 'REFUND', \(windowStart), 'com.example', 'Production', 'x', 'history', \(other.runId), 'applied'),
                       ('live', 'REFUND', \(windowStart), 'com.example', 'Production', 'x', 'webhook', NULL, 'applied')
                """)
            let first = APIStatistics.Timeline(
                entries: (0..<10).map {
                    .init(
                        endpoint: "Get Notification History", second: 1_900_000_000 + Int64($0),
                        counts: .init(requests: 10, rateLimited: $0 == 3 ? 1 : 0, retries: $0 == 4 ? 1 : 0))
                })
            let second = APIStatistics.Timeline(entries: [
                .init(endpoint: "Get Notification History", second: 1_900_000_005, counts: .init(requests: 7))
            ])
            for _ in 0..<2 {
                try await ledger.recordAPITimeline(runId: created.runId, worker: "host:1:a#0001", first, budget: [.getNotificationHistory: 40])
            }
            try await ledger.recordAPITimeline(runId: created.runId, worker: "host:2:b#0002", second, budget: [.getNotificationHistory: 10])
            try await ledger.recordAPITimeline(runId: other.runId, worker: "host:3:c#0003", first, budget: [.getNotificationHistory: 99])

            let run = try #require(try await ledger.run(id: created.runId))
            let timeline = try await ledger.timeline(run: run)
            #expect(timeline.signedAxis == .init(start: windowStart, end: windowEnd, bucketMilliseconds: 120_000))
            #expect(timeline.runAxis == .init(start: 1_900_000_000_000, end: 1_900_000_200_000, bucketMilliseconds: 5000))
            struct Key: Hashable {
                var type: String
                var bucket: Int
            }
            var bySigned: [Key: (Int, Int)] = [:], byApplied: [Key: (Int, Int)] = [:]
            for i in 0..<10_000 {
                let type = i % 8 == 4 ? "DID_RENEW/BILLING_RECOVERY" : i % 4 == 0 ? "DID_RENEW" : "REFUND"
                let stale = i % 10 == 0
                bySigned[Key(type: type, bucket: i / 120), default: (0, 0)].0 += stale ? 0 : 1
                bySigned[Key(type: type, bucket: i / 120), default: (0, 0)].1 += stale ? 1 : 0
                byApplied[Key(type: type, bucket: i / 500), default: (0, 0)].0 += stale ? 0 : 1
                byApplied[Key(type: type, bucket: i / 500), default: (0, 0)].1 += stale ? 1 : 0
            }
            #expect(timeline.bySignedDate.count == bySigned.count)
            #expect(timeline.bySignedDate.count < 300)
            for bucket in timeline.bySignedDate {
                let expected = bySigned[Key(type: bucket.typeAndSubtype, bucket: bucket.bucket)]
                #expect(expected?.0 == bucket.applied && expected?.1 == bucket.stale && bucket.recorded == 0, "\(bucket)")
            }
            #expect(timeline.byAppliedTime.count == byApplied.count)
            for bucket in timeline.byAppliedTime {
                let expected = byApplied[Key(type: bucket.typeAndSubtype, bucket: bucket.bucket)]
                #expect(expected?.0 == bucket.applied && expected?.1 == bucket.stale, "\(bucket)")
            }

            // Requests: 10 a second for 10 s from the first stint (written twice), 7 more in second 5 from another process.
            #expect(timeline.apiAxis == .init(start: 1_900_000_000_000, end: 1_900_000_200_000, bucketMilliseconds: 2000))
            #expect(timeline.api.reduce(0) { $0 + $1.requests } == 107)
            #expect(timeline.api.reduce(0) { $0 + $1.rateLimited } == 1)
            #expect(timeline.api.reduce(0) { $0 + $1.retries } == 1)
            #expect(timeline.api.map(\.busiestSecond).max() == 17)
            #expect(timeline.api.first { $0.bucket == 2 }?.requests == 27)
            #expect(timeline.apiBudgets == ["Get Notification History": 40])
            #expect(timeline.apiProcesses == 2)
        }
    }

}
