import Foundation
import PostgresNIO
import TestSupport
import Testing

/// `reconciler run` end to end: real processes, a real PostgreSQL, the mock App Store over HTTP.
@Suite(.serialized) struct ReconcileRunTests {
    @Test func aRunRecoversTheOutageExactlyAndARerunChangesNothing() async throws {
        try await Rehearsal.with(customers: 80) { rehearsal in
            let live = try await rehearsal.db.count("SELECT count(*) FROM notifications WHERE source = 'webhook'")
            #expect(live > 100)
            // Before the run, the webhook missed the outage: the state is not the truth.
            #expect(try await rehearsal.export() != (try await rehearsal.truth()))

            let reportPath = rehearsal.file("report.json")
            let run = try await rehearsal.runWindow(["--report-json", reportPath])
            #expect(run.status == 0, "\(run.stdout)\n\(run.stderr)")
            #expect(run.stdout.contains("SUCCEEDED"))
            let export = try await rehearsal.export(), truth = try await rehearsal.truth()
            #expect(export == truth, "\(Rehearsal.difference(export, truth))")

            let report = try Rehearsal.report(reportPath)
            let byType = report["notificationsByType"] as? [String: [String: Int]] ?? [:]
            // The subtype rule: DID_RENEW/BILLING_RECOVERY is in the window and was recovered.
            #expect((byType["DID_RENEW/BILLING_RECOVERY"]?["seen"] ?? 0) >= 1)
            // A type this code does not know was recorded, not dropped.
            #expect((byType["FUTURE_NOTIFICATION_TYPE"]?["seen"] ?? 0) >= 1)
            #expect(try await rehearsal.db.count("SELECT count(*) FROM notifications WHERE notification_type = 'FUTURE_NOTIFICATION_TYPE'") >= 2)
            #expect((report["changes"] as? [Any])?.isEmpty == false)
            #expect(((report["notifications"] as? [String: Int])?["applied"] ?? 0) > 0)

            // A second run of the same window: zero state changes, and the stored revisions mean
            // transaction history returns nothing new.
            let fingerprint = try await rehearsal.db.stateFingerprint()
            let secondReport = rehearsal.file("second.json")
            let rerun = try await rehearsal.runWindow(["--report-json", secondReport])
            #expect(rerun.status == 0, "\(rerun.stderr)")
            #expect(try await rehearsal.db.stateFingerprint() == fingerprint)
            let second = try Rehearsal.report(secondReport)
            #expect((second["changes"] as? [Any])?.isEmpty == true)
            #expect(((second["notifications"] as? [String: Int])?["applied"] ?? -1) == 0)
            #expect((second["transactionsFetched"] as? Int) == 0)
            #expect(try await rehearsal.db.count("SELECT count(*) FROM history_revisions") > 0)
        }
    }

    @Test func aDryRunChangesNothingAndSaysWhatWouldChange() async throws {
        try await Rehearsal.with(customers: 40, seed: 8) { rehearsal in
            let fingerprint = try await rehearsal.db.stateFingerprint()
            let revisions = try await rehearsal.db.count("SELECT count(*) FROM history_revisions")
            let reportPath = rehearsal.file("dry.json")
            let dry = try await rehearsal.runWindow(["--dry-run", "--report-json", reportPath])
            #expect(dry.status == 0, "\(dry.stderr)")
            #expect(dry.stdout.contains("DRY RUN"))
            #expect(try await rehearsal.db.stateFingerprint() == fingerprint)
            #expect(try await rehearsal.db.count("SELECT count(*) FROM history_revisions") == revisions)
            let report = try Rehearsal.report(reportPath)
            #expect(((report["notifications"] as? [String: Int])?["applied"] ?? 0) > 0)
            #expect((report["changes"] as? [Any])?.isEmpty == false)
            // The real run afterwards does the work the dry run described.
            let real = try await rehearsal.runWindow()
            #expect(real.status == 0, "\(real.stderr)")
            let export = try await rehearsal.export(), truth = try await rehearsal.truth()
            #expect(export == truth, "\(Rehearsal.difference(export, truth))")
        }
    }

    @Test func killedRunsResumeToTheSameStateWithNothingAppliedTwice() async throws {
        // Latency and little concurrency make a run last several seconds, so every kill lands mid-run.
        try await Rehearsal.with(customers: 80, seed: 21, mockArguments: ["--latency-ms", "50", "--latency-jitter-ms", "20"]) { rehearsal in
            var kills = 0
            var finished = false
            var attempt = 0
            while !finished {
                attempt += 1
                let run = try rehearsal.start([
                    "run", "--start", rehearsal.outageStart, "--end", rehearsal.outageEnd,
                    "--concurrency", "2", "--gap-concurrency", "2",
                ])
                if attempt == 1 {
                    // The first kill lands once a page is committed, so at least one lands mid-run
                    // however fast the machine (a run finished before a random delay killed nothing).
                    try await eventually("a committed page") {
                        try await rehearsal.db.count("SELECT COALESCE(sum(pages_done), 0)::bigint FROM run_shards") > 0
                    }
                    if run.process.isRunning {
                        run.signal(SIGKILL)
                        kills += 1
                    }
                } else if attempt <= 4 {
                    // Kill at a random moment, as a crash would.
                    try await Task.sleep(for: .milliseconds(Int.random(in: 300...2500)))
                    if run.process.isRunning {
                        run.signal(SIGKILL)
                        kills += 1
                    }
                }
                let result = try await run.wait()
                // A kill can land after the run recorded its end, while the process prints and exits
                // (a resumed run may finish within the kill's delay): that run is finished too, and
                // rerunning the window would rightly make a new run.
                let recordedEnd = try await rehearsal.db.count("SELECT count(*) FROM reconcile_runs WHERE status = 'succeeded'") == 1
                finished = (result.status == 0 && result.stdout.contains("SUCCEEDED")) || recordedEnd
                #expect(attempt < 12, "the run never finished: \(result.stderr)")
                if attempt >= 12 { break }
            }
            #expect(kills >= 1)
            let export = try await rehearsal.export(), truth = try await rehearsal.truth()
            #expect(export == truth, "\(Rehearsal.difference(export, truth))")
            // Every run of the window resumed the same run, and each replayed notification was
            // counted as newly recorded exactly once across all the kills.
            let runs = try await rehearsal.db.strings(
                "SELECT run_id || ' ' || status || ' ' || coalesce(failure, '') FROM reconcile_runs ORDER BY run_id")
            #expect(runs.count == 1, "\(runs)")
            let recorded = try await rehearsal.db.count(
                """
                SELECT COALESCE(sum(count), 0)::bigint FROM run_counts WHERE outcome IN ('applied', 'stale', 'recorded')
                """)
            #expect(recorded == (try await rehearsal.db.count("SELECT count(*) FROM notifications WHERE source = 'history'")))
        }
    }

    /// `run`'s one test with a real signal (the exit code on a signal is part of the contract):
    /// SIGTERM stops it at a checkpoint with exit 2, it still writes its incident page (how it
    /// ended, what it requested), and the rerun resumes the same run. Ctrl-C (SIGINT) takes the same
    /// path (CommandLifecycle; GracefulShutdownTests in process).
    @Test func sigtermStopsARunCleanlyAndTheRerunResumesIt() async throws {
        try await Rehearsal.with(customers: 60, seed: 23, mockArguments: ["--latency-ms", "120"]) { rehearsal in
            let pagePath = rehearsal.file("interrupted.html"), jsonPath = rehearsal.file("interrupted.json")
            let run = try rehearsal.start([
                "run", "--start", rehearsal.outageStart, "--end", rehearsal.outageEnd, "--concurrency", "2",
                "--report-html", pagePath, "--report-json", jsonPath,
            ])
            try await eventually("committed pages") {
                try await rehearsal.db.count("SELECT COALESCE(sum(pages_done), 0)::bigint FROM run_shards") > 2
            }
            run.signal(SIGTERM)
            let stopped = try await run.wait(timeout: .seconds(60))
            #expect(stopped.status == 2, "\(stopped.stdout)\n\(stopped.stderr)")
            #expect(stopped.stdout.contains("INTERRUPTED"), "\(stopped.stderr)")
            #expect(stopped.stderr.contains("rerun the same command"))
            #expect(try await rehearsal.db.count("SELECT count(*) FROM reconcile_runs WHERE status = 'interrupted'") == 1)
            ReportPageTests.expectSelfContained(try String(contentsOfFile: pagePath, encoding: .utf8))
            let page = try await Chromium.load("file://\(pagePath)")
            ReportPageTests.expectRenderedWithoutErrors(page)
            #expect(ReportPageTests.attribute("data-status", in: page.dom).first == "interrupted")
            let report = try Rehearsal.report(jsonPath)
            #expect(
                ReportPageTests.attribute("data-requests", in: page.dom).compactMap(Int.init).reduce(0, +)
                    == (report["api"] as? [String: Int])?["requests"])
            #expect(ReportPageTests.totals(in: page.dom)["pages"] == (report["pages"] as? Int).map(String.init))
            let resumed = try await rehearsal.runWindow()
            #expect(resumed.status == 0, "\(resumed.stderr)")
            #expect(try await rehearsal.db.count("SELECT count(*) FROM reconcile_runs") == 1)
            let export = try await rehearsal.export(), truth = try await rehearsal.truth()
            #expect(export == truth, "\(Rehearsal.difference(export, truth))")
        }
    }

    @Test func expiredTokens429StormsAnd5xxBurstsAreSurvived() async throws {
        try await Rehearsal.with(
            customers: 80, seed: 13,
            mockArguments: [
                "--fault-expire-tokens", "0.3", "--fault-429", "0.15", "--fault-5xx", "0.15", "--fault-drop", "0.05", "--fault-truncate", "0.05",
            ]
        ) { rehearsal in
            let reportPath = rehearsal.file("faults.json")
            // Large shards so pages follow tokens (and tokens can expire).
            var run = try await rehearsal.runWindow(["--report-json", reportPath, "--shard-duration", "3h"])
            // With 40% of requests failing at random, a request can fail more often in a row than the
            // client retries (seen once in about 30 full passes): the run is then partial (exit 2) and says to
            // rerun, and the rerun resumes it. That is the documented path, so it is taken, at most twice.
            for _ in 0..<2 where run.status == 2 && (run.stdout + run.stderr).contains("rerun the same command") {
                run = try await rehearsal.runWindow(["--report-json", reportPath, "--shard-duration", "3h"])
            }
            #expect(run.status == 0, "\(run.stdout)\n\(run.stderr)")
            #expect(try await rehearsal.db.count("SELECT count(*) FROM reconcile_runs") == 1, "a rerun resumes the run")
            let export = try await rehearsal.export(), truth = try await rehearsal.truth()
            #expect(export == truth, "\(Rehearsal.difference(export, truth))")
            let stats = try await rehearsal.mockStatistics()
            #expect((stats["injectedRateLimits"] as? Int ?? 0) > 0)
            #expect((stats["injectedServerErrors"] as? Int ?? 0) > 0)
            #expect((stats["expiredTokens"] as? Int ?? 0) > 0)
            #expect((stats["retryAfterViolations"] as? Int) == 0)
            let report = try Rehearsal.report(reportPath)
            #expect((report["paginationRestarts"] as? Int ?? 0) > 0)
            #expect(((report["api"] as? [String: Int])?["rateLimited"] ?? 0) > 0)
        }
    }

    /// A forged payload is quarantined once (exit 4), never applied, and the next run
    /// that meets it again is not held back by it (exit 0).
    @Test func aForgedPayloadIsQuarantinedOnceNeverAppliedAndDoesNotHoldTheNextRunBack() async throws {
        try await Rehearsal.with(customers: 30, seed: 5, mockArguments: ["--forged", "2"]) { rehearsal in
            let reportPath = rehearsal.file("forged.json")
            let run = try await rehearsal.runWindow(["--report-json", reportPath])
            #expect(run.status == 4, "\(run.stdout)\n\(run.stderr)")
            #expect(run.stdout.contains("SUCCEEDED_WITH_REJECTIONS"))
            #expect(run.stdout.contains("QUARANTINED"))
            #expect(run.stdout.contains("UNTRUSTED_ROOT"))
            let report = try Rehearsal.report(reportPath)
            let rejections = report["rejections"] as? [[String: Any]] ?? []
            #expect(rejections.count == 2)
            #expect(rejections.allSatisfy { $0["newlyQuarantined"] as? Bool == true })
            #expect(try await rehearsal.db.count("SELECT count(*) FROM quarantined_payloads WHERE acknowledged_at IS NULL") == 2)
            #expect(try await rehearsal.db.count("SELECT count(*) FROM purchases WHERE original_transaction_id LIKE '9000000000%'") == 0)
            #expect(try await rehearsal.db.count("SELECT count(*) FROM transactions WHERE original_transaction_id LIKE '9000000000%'") == 0)
            // Everything genuine was still recovered.
            let export = try await rehearsal.export(), truth = try await rehearsal.truth()
            #expect(export == truth, "\(Rehearsal.difference(export, truth))")

            // The same window again: the payloads are met, reported as known, and the run succeeds.
            let againPath = rehearsal.file("again.json")
            let again = try await rehearsal.runWindow(["--report-json", againPath])
            #expect(again.status == 0, "\(again.stdout)\n\(again.stderr)")
            #expect(again.stdout.contains("QUARANTINED BEFORE"))
            let known = try Rehearsal.report(againPath)["rejections"] as? [[String: Any]] ?? []
            #expect(known.count == 2)
            #expect(known.allSatisfy { $0["newlyQuarantined"] as? Bool == false })
            #expect(try await rehearsal.db.count("SELECT min(times_seen) FROM quarantined_payloads") == 2)

            // `reconciler rejections` lists them and acknowledges one.
            let list = try await rehearsal.reconciler(["rejections", "--json"])
            #expect(list.status == 0, "\(list.stderr)")
            let listed = try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]] ?? []
            #expect(listed.count == 2)
            let hash = try #require(listed.first?["payloadSHA256"] as? String)
            let ack = try await rehearsal.reconciler(["rejections", "--ack", String(hash.prefix(12)), "--note", "drill"])
            #expect(ack.status == 0, "\(ack.stderr)")
            #expect(try await rehearsal.db.count("SELECT count(*) FROM quarantined_payloads WHERE acknowledged_at IS NULL") == 1)
            let unknown = try await rehearsal.reconciler(["rejections", "--ack", "ffffffffffff"])
            #expect(unknown.status == 1)
            let shown = try await rehearsal.reconciler(["rejections", "--show", hash])
            #expect(shown.status == 0)
            let inspect = try await runProcess(
                "reconciler", ["inspect", "-"], environment: rehearsal.environment,
                stdin: Data(shown.stdout.utf8))
            #expect(inspect.status == 3, "\(inspect.stdout)\n\(inspect.stderr)")
        }
    }

    @Test func oneRunAtATimeAndClearErrorsForBadWindows() async throws {
        try await Rehearsal.with(customers: 40, seed: 17, mockArguments: ["--latency-ms", "150"]) { rehearsal in
            let first = try rehearsal.start(["run", "--start", rehearsal.outageStart, "--end", rehearsal.outageEnd, "--concurrency", "2"])
            try await eventually("the first run to hold the lease") {
                try await rehearsal.db.count("SELECT count(*) FROM run_leases WHERE run_id = 1") == 1
            }
            let second = try await rehearsal.runWindow()
            #expect(second.status == 1)
            #expect(second.stderr.contains("holds the lease"), "\(second.stderr)")
            #expect(second.stderr.contains("run 1"))
            let waiting = try await rehearsal.runWindow(["--wait"])
            #expect(waiting.status == 0, "\(waiting.stderr)")
            #expect(try await first.wait().status == 0)

            let backwards = try await rehearsal.reconciler(["run", "--start", rehearsal.outageEnd, "--end", rehearsal.outageStart])
            #expect(backwards.status == 1)
            #expect(backwards.stderr.contains("not before its end"))
            let tooOld = try await rehearsal.reconciler(["run", "--start", "now-200d", "--end", "now-199d"])
            #expect(tooOld.status == 1)
            #expect(tooOld.stderr.contains("retention"))
            let garbage = try await rehearsal.reconciler(["run", "--start", "yesterday-ish"])
            #expect(garbage.status == 1)
            #expect(garbage.stderr.contains("--start"))
            // Times and durations are read once, with the command line: a bad one names its option.
            let badOverlap = try await rehearsal.reconciler(["run", "--since-last", "--overlap", "soon"])
            #expect(badOverlap.status == 1)
            #expect(badOverlap.stderr.contains("--overlap") && badOverlap.stderr.contains("soon"), "\(badOverlap.stderr)")
            let badPriority = try await rehearsal.reconciler(["run", "--start", "now-1h", "--priority", "DID_RENEW/VOLUNTARY2"])
            #expect(badPriority.status == 1)
            let status = try await rehearsal.reconciler(["status"])
            #expect(status.status == 0)
            #expect(status.stdout.contains("succeeded"))
        }
    }
}
