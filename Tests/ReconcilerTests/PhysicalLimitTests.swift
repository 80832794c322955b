import AppStoreServer
import Foundation
import Logging
import MockAppStore
import PostgresNIO
import ReconcilerDomain
import Testing

@testable import Reconciler
@testable import ReconcilerStore

/// Issue 10: a run at Apple's limit: both phases at once, shards that adapt to the data, one
/// request budget for every process of an app. Real processes, PostgreSQL and the mock over HTTP.
@Suite(.serialized) struct PhysicalLimitTests {
    /// A customer phase 1 touches again while phase 2 reads its history is read again.
    @Test func aCustomerTouchedAgainWhileItsHistoryIsReadIsReadAgain() async throws {
        try await TestDatabase.with { db in
            let ledger = RunLedger(database: db.database)
            let run = try await ledger.createRun(
                kind: .manual, environment: "Production", bundleId: "com.example", windowStart: 0, windowEnd: 1,
                dryRun: false, options: .init(), shards: [], holder: "test")
            try await db.database.transaction { try await ledger.enqueue(runId: run.runId, anchors: ["1000"], reason: .touched, on: $0) }
            #expect(try await ledger.leaseCustomer(runId: run.runId, worker: "w", leaseDuration: .seconds(60)) == "1000")
            // Phase 1 replays another notification of the customer now.
            try await db.database.transaction { try await ledger.enqueue(runId: run.runId, anchors: ["1000"], reason: .touched, on: $0) }
            #expect(
                try await db.database.transaction {
                    try await ledger.completeCustomer(runId: run.runId, anchor: "1000", worker: "w", transactionsSeen: 1, on: $0)
                })
            #expect(try await ledger.queueSummary(runId: run.runId).pending == 1)
            #expect(try await ledger.leaseCustomer(runId: run.runId, worker: "w", leaseDuration: .seconds(60)) == "1000")
            #expect(
                try await db.database.transaction {
                    try await ledger.completeCustomer(runId: run.runId, anchor: "1000", worker: "w", transactionsSeen: 0, on: $0)
                })
            #expect(try await ledger.queueSummary(runId: run.runId).done == 1)
            // A done customer touched again is pending again; one queued as due stays as it is.
            try await db.database.transaction { try await ledger.enqueue(runId: run.runId, anchors: ["1000"], reason: .touched, on: $0) }
            #expect(try await ledger.queueSummary(runId: run.runId).pending == 1)
            try await db.database.transaction { try await ledger.enqueue(runId: run.runId, anchors: ["2000"], reason: .due, on: $0) }
            try await db.database.transaction { try await ledger.enqueue(runId: run.runId, anchors: ["2000"], reason: .due, on: $0) }
            #expect(try await ledger.queueSummary(runId: run.runId).pending == 2)
        }
    }

    /// A notification Apple signed before a customer's history read began is in that history: it
    /// does not make the customer read again, nor keep it from being covered by another purchase's
    /// history. One signed after the read began (within the margin) does both.
    @Test func onlyANotificationSignedAfterTheReadBeganMakesItReadAgain() async throws {
        try await TestDatabase.with { db in
            let ledger = RunLedger(database: db.database)
            let run = try await ledger.createRun(
                kind: .manual, environment: "Production", bundleId: "com.example", windowStart: 0, windowEnd: 1,
                dryRun: false, options: .init(), shards: [], holder: "test")
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            let margin = RunLedger.rereadMargin.components.seconds * 1000
            func touch(_ anchor: String, signed: Int64) async throws {
                try await db.database.transaction {
                    try await ledger.enqueue(runId: run.runId, touches: [.init(anchor: anchor, newestSignedDate: signed)], on: $0)
                }
            }
            func complete(_ anchor: String, covering: [String] = []) async throws -> Bool {
                try await db.database.transaction {
                    try await ledger.markCovered(runId: run.runId, anchors: covering, by: anchor, on: $0)
                    return try await ledger.completeCustomer(runId: run.runId, anchor: anchor, worker: "w", transactionsSeen: 1, on: $0)
                }
            }
            try await touch("1000", signed: now - 3_600_000)
            #expect(try await ledger.leaseCustomer(runId: run.runId, worker: "w", leaseDuration: .seconds(60)) == "1000")
            // While it is read: an old notification changes nothing, a new one brings it back.
            try await touch("1000", signed: now - margin - 60_000)
            #expect(try await complete("1000"))
            #expect(try await ledger.queueSummary(runId: run.runId).done == 1)
            try await touch("1000", signed: now - margin - 60_000)
            #expect(try await ledger.queueSummary(runId: run.runId).pending == 0)
            try await touch("1000", signed: now)
            #expect(try await ledger.queueSummary(runId: run.runId).pending == 1)

            // Another purchase of the same customer, touched by a notification signed before the read
            // of the first began, is covered by it; one touched by a notification signed after is not.
            try await touch("2000", signed: now - 2 * margin)
            try await touch("3000", signed: now + 60_000)
            #expect(try await ledger.leaseCustomer(runId: run.runId, worker: "w", leaseDuration: .seconds(60)) == "1000")
            #expect(try await complete("1000", covering: ["1000", "2000", "3000"]))
            let summary = try await ledger.queueSummary(runId: run.runId)
            #expect(summary.done == 2 && summary.pending == 1)
            #expect(try await ledger.leaseCustomer(runId: run.runId, worker: "w", leaseDuration: .seconds(60)) == "3000")
        }
    }

    /// Phase 2 works while phase 1 pages: customers are done before the replay ends, and the run
    /// still ends exactly at the truth.
    @Test func bothPhasesRunAtOnce() async throws {
        try await Rehearsal.with(customers: 80, seed: 81, mockArguments: ["--latency-ms", "40"]) { rehearsal in
            let reportPath = Rehearsal.temporaryFile("both.json")
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

    /// Two processes of one app (a run and a `work` process), app budget 8 requests a second
    /// (APP_STORE_RATE_LIMIT): they share it on the endpoints both call, so together they stay
    /// under the mock's limit of 10 (each spending the whole budget would exceed it); and after a
    /// 429 neither sends before the instant it announced.
    @Test func processesOfAnAppShareOneBudget() async throws {
        try await Rehearsal.with(
            customers: 80, seed: 85, mockArguments: ["--rate-limit", "10", "--latency-ms", "20"], environment: ["APP_STORE_RATE_LIMIT": "8"]
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
            #expect(worker.stdout.contains("customers done here"))
            let export = try await rehearsal.export(), truth = try await rehearsal.truth()
            #expect(export == truth, "\(Rehearsal.difference(export, truth))")
        }
    }

    /// An endpoint a 429 closed stays closed for a process started afterwards, until the instant
    /// Apple gave: it learns it from PostgreSQL before its first request.
    @Test func aRetryAfterClosesTheEndpointForProcessesStartedLater() async throws {
        try await TestDatabase.with { db in
            func budget(_ bundleId: String) -> SharedBudget {
                SharedBudget(
                    configuration: .init(claims: [.getTransactionHistory: .init(appBudget: 40)]), database: db.database,
                    limiter: RateLimiter(requestsPerSecond: [.getTransactionHistory: 40]), environment: .production, bundleId: bundleId)
            }
            let first = budget("com.example")
            try await first.join()
            let until = Int64(Date().timeIntervalSince1970 * 1000) + 60_000
            await first.endpointClosed(.getTransactionHistory, untilUNIXMilliseconds: until)
            await first.leave()
            // A new process of the same app: the endpoint is closed for it too.
            let later = budget("com.example")
            try await later.join()
            let refused = await #expect(throws: RateLimiter.EndpointClosed.self) {
                try await later.limiter.waitForTurn(.getTransactionHistory, longestClosure: .seconds(1))
            }
            #expect(refused.map { abs($0.reopensAt - until) < 1000 } == true)
            // Another app's endpoints stay open.
            let other = budget("com.example.other")
            try await other.join()
            try await other.limiter.waitForTurn(.getTransactionHistory, longestClosure: .seconds(1))
        }
    }

    /// Live processes that call an endpoint divide the app's budget for it equally, and re-divide
    /// when one leaves.
    @Test func liveProcessesDivideTheAppsBudget() async throws {
        try await TestDatabase.with { db in
            func budget(_ name: String) -> SharedBudget {
                SharedBudget(
                    configuration: .init(claims: [.getNotificationHistory: .init(appBudget: 40)], leaseDuration: .seconds(600), process: name),
                    database: db.database,
                    limiter: RateLimiter(requestsPerSecond: [.getNotificationHistory: 40]), environment: .production, bundleId: "com.example")
            }
            let a = budget("a"), b = budget("b")
            try await a.join()
            #expect(a.processes == 1)
            #expect(await a.limiter.requestsPerSecond(of: .getNotificationHistory) == 40)
            try await b.join()
            try await a.renew(announce: false)
            #expect(a.processes == 2)
            #expect(await a.limiter.requestsPerSecond(of: .getNotificationHistory) == 20)
            #expect(await b.limiter.requestsPerSecond(of: .getNotificationHistory) == 20)
            await b.leave()
            try await a.renew(announce: false)
            #expect(a.processes == 1)
            #expect(await a.limiter.requestsPerSecond(of: .getNotificationHistory) == 40)
        }
    }
}
