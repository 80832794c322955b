import AppStoreServer
import Foundation
import PostgresNIO
import ReconcilerDomain
import TestSupport
import Testing

@testable import Reconciler

/// A run at Apple's limit: both phases at once, shards that adapt to the data, one
/// request budget for every process of an app. Real processes, PostgreSQL and the mock over HTTP.
@Suite(.serialized) struct ConcurrentRunTests {
    /// Phase 2 works while phase 1 pages: customers are done before the replay ends, and the run
    /// still ends exactly at the truth.
    @Test func bothPhasesRunAtOnce() async throws {
        try await Rehearsal.with(customers: 80, seed: 81, mockArguments: ["--latency-ms", "40"]) { rehearsal in
            let reportPath = rehearsal.file("both.json")
            let run = try await rehearsal.runWindow(["--concurrency", "2", "--gap-concurrency", "4", "--report-json", reportPath])
            #expect(run.status == 0, "\(run.stdout)\n\(run.stderr)")
            #expect(run.stdout.contains("phase 1 done after"))
            let early = try await rehearsal.db.count(
                """
                SELECT count(*) FROM gap_queue g JOIN reconcile_runs r USING (run_id)
                WHERE g.status = 'done' AND g.updated_at < r.replay_finished_at
                """)
            #expect(early > 0, "no customer was done before phase 1 ended")
            let report = try Rehearsal.report(reportPath)
            #expect((report["replaySeconds"] as? Double).map { $0 > 0 } == true)
            #expect((report["urgentRecoverySeconds"] as? Double).map { $0 > 0 } == true)
            let export = try await rehearsal.export(), truth = try await rehearsal.truth()
            #expect(export == truth, "\(Rehearsal.difference(export, truth))")
        }
    }

    /// Each query starts as one shard: an empty query costs one request; a dense one splits for
    /// idle workers; a run killed after splits resumes their pieces, applies nothing twice, and
    /// every query's shards still cover the whole window.
    @Test func denseShardsSplitAndAKilledRunResumesTheirPieces() async throws {
        // Pages of three: the window's notifications take dozens of pages, so its queries are dense.
        try await Rehearsal.with(customers: 120, seed: 83, mockArguments: ["--latency-ms", "60", "--page-size", "3"]) { rehearsal in
            let first = try rehearsal.start([
                "run", "--start", rehearsal.outageStart, "--end", rehearsal.outageEnd,
                "--concurrency", "4", "--gap-concurrency", "1",
            ])
            try await eventually("a split") {
                try await rehearsal.db.count("SELECT count(*) FROM run_shards WHERE split_from_ms IS NOT NULL") > 0
            }
            first.signal(SIGKILL)
            _ = try await first.wait()
            let resumed = try await rehearsal.runWindow(["--concurrency", "4"])
            #expect(resumed.status == 0, "\(resumed.stdout)\n\(resumed.stderr)")
            #expect(try await rehearsal.db.count("SELECT count(*) FROM reconcile_runs") == 1)
            let recorded = try await rehearsal.db.count(
                """
                SELECT COALESCE(sum(count), 0)::bigint FROM run_counts WHERE outcome IN ('applied', 'stale', 'recorded')
                """)
            #expect(recorded == (try await rehearsal.db.count("SELECT count(*) FROM notifications WHERE source = 'history'")))
            // Every query's window is covered: each shard's done part, and the pieces of the split ones.
            let gaps = try await rehearsal.db.count(
                """
                WITH parts AS (
                    SELECT query_index, shard_start_ms AS a, COALESCE(split_at_ms, shard_end_ms) AS b FROM run_shards WHERE status = 'done'
                ), window_ AS (SELECT window_start_ms AS ws, window_end_ms AS we FROM reconcile_runs WHERE run_id = 1),
                ordered AS (
                    SELECT query_index, a, b, max(b) OVER (PARTITION BY query_index ORDER BY a ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach
                    FROM parts
                )
                SELECT count(*) FROM ordered, window_ WHERE (reach IS NULL AND a > ws) OR (reach IS NOT NULL AND a > reach)
                    OR (query_index IN (SELECT query_index FROM parts GROUP BY 1 HAVING max(b) < (SELECT we FROM window_)))
                """)
            #expect(gaps == 0, "a query's shards leave part of the window uncovered")
            // A query that found nothing cost one request.
            #expect(
                try await rehearsal.db.count(
                    """
                    SELECT count(*) FROM (SELECT query_index FROM run_shards GROUP BY 1 HAVING sum(notifications_seen) = 0 AND sum(pages_done) > 1) AS q
                    """) == 0)
            let export = try await rehearsal.export(), truth = try await rehearsal.truth()
            #expect(export == truth, "\(Rehearsal.difference(export, truth))")
        }
    }

    /// Two processes of one app (a run and a `work` process), app budget 6 requests a second
    /// (APP_STORE_RATE_LIMIT): they share it on the endpoints both call, so together they stay
    /// under the mock's limit of 10 (each spending the whole budget would exceed it; the run still
    /// spending all of it for a moment after the worker took its share would not, so a stalled
    /// process on a loaded machine does not fail the test); and after a 429 neither sends before the
    /// instant it announced.
    @Test func processesOfAnAppShareOneBudget() async throws {
        try await Rehearsal.with(
            customers: 80, seed: 85, mockArguments: ["--rate-limit", "10", "--latency-ms", "20"], environment: ["APP_STORE_RATE_LIMIT": "6"]
        ) { rehearsal in
            try await rehearsal.resetMockStatistics()
            let run = try rehearsal.start(["run", "--start", rehearsal.outageStart, "--end", rehearsal.outageEnd, "--all", "--refresh-status"])
            try await eventually("the run") {
                try await rehearsal.db.count("SELECT count(*) FROM reconcile_runs WHERE status = 'running'") == 1
            }
            let worker = try await rehearsal.reconciler(["work", "--run", "1"])
            #expect(worker.status == 0, "\(worker.stdout)\n\(worker.stderr)")
            let result = try await run.wait()
            #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
            let stats = try await rehearsal.mockStatistics()
            #expect(stats["rateLimited"] as? Int == 0, "\(stats)")
            #expect(stats["retryAfterViolations"] as? Int == 0, "\(stats)")
            // Both processes called Apple.
            #expect(worker.stdout.contains(" done here"), "\(worker.stdout)")
            let export = try await rehearsal.export(), truth = try await rehearsal.truth()
            #expect(export == truth, "\(Rehearsal.difference(export, truth))")
        }
    }

}
