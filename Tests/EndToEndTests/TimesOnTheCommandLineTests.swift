import Foundation
import PostgresNIO
import ReconcilerShared
import TestSupport
import Testing

/// Times on the command line: strict ISO 8601 with a zone, UNIX milliseconds or
/// `now-<number><unit>`, anything else refused before anything is asked of Apple or written; and
/// every run prints the window it will recover before its first request. Real processes
/// (`mock-appstore`, `reconciler`), a real PostgreSQL.
@Suite(.serialized) struct TimesOnTheCommandLineTests {
    /// `--start now-6` recovered a 0.2-second window and exited 0; `2026-11-2T…` was read as
    /// 2 November. Each typo is refused (exit 1) naming what is wrong and the accepted forms, and
    /// nothing reaches Apple or the database.
    @Test func aTypoInATimeIsRefusedBeforeAnyRequestOrRun() async throws {
        try await HistoryMock.with(["--customers", "4", "--span", "2d"]) { mock in
            let times: [([String], String)] = [
                (["run", "--start", "now-6"], "the offset has no unit"),
                (["run", "--start", "2026-11-2T03:10:00Z"], "the day must have two digits"),
                (["run", "--start", "now-6h", "--end", "2026-11-20T03:10:00"], "no zone"),
                (["run", "--start", "1700000000"], "at least 10^11"),
                (["repair", "--transaction-id", "2000000000000001", "--since", "now-30"], "the offset has no unit"),
                (["export", "--at", "2026-11-20"], "no time of day"),
                (["verify-stored", "--since", "now-7"], "the offset has no unit"),
            ]
            for (arguments, problem) in times {
                let refused = try await mock.reconciler(arguments)
                #expect(refused.status == 1, "\(arguments): \(refused.stdout)\n\(refused.stderr)")
                #expect(refused.stderr.contains(problem), "\(arguments): \(refused.stderr)")
                #expect(refused.stderr.contains("now-<number><unit>") && refused.stderr.contains("2026-11-20T03:10:00Z"), "\(refused.stderr)")
                #expect(refused.stdout.isEmpty)
            }
            // A length without a unit is no length either (it was read as milliseconds).
            for arguments in [
                ["run", "--since-last", "--overlap", "3600"], ["detect-outage", "--since", "7"], ["run", "--detected", "--detect-since", "7"],
            ] {
                let refused = try await mock.reconciler(arguments)
                #expect(refused.status == 1, "\(arguments): \(refused.stdout)\n\(refused.stderr)")
                #expect(refused.stderr.contains("is invalid for '\(arguments[arguments.count - 2])"), "\(arguments): \(refused.stderr)")
            }
            let requests = try await mock.requests()
            #expect(requests.values.reduce(0, +) == 0, "\(requests)")
            #expect(try await mock.db.count("SELECT count(*) FROM reconcile_runs") == 0)
        }
    }

    /// The window each run will recover, both ends in ISO 8601 and its length, is on stderr before
    /// the run's first request: here the first request is refused (a key that does not cover the
    /// app), and the window was printed before the error all the same.
    @Test func aRunPrintsItsWindowBeforeItsFirstRequest() async throws {
        let app = "com.example.reconciler.mock"
        try await HistoryMock.with(["--customers", "4", "--span", "2d", "--unauthorized-app", app]) { mock in
            let run = try await mock.reconciler(["run", "--start", "now-2h", "--end", "now-1h"])
            #expect(run.status == 1, "\(run.stdout)\n\(run.stderr)")
            let windows = Self.windows(run.stderr)
            #expect(windows.map(\.target) == ["\(app) (Production)"], "\(run.stderr)")
            let window = try #require(windows.first)
            #expect(window.length == "1h" && abs((window.end - window.start).milliseconds - 3_600_000) < 60_000, "\(run.stderr)")
            #expect(abs((Timestamp.now - window.end).milliseconds - 3_600_000) < 600_000, "\(run.stderr)")
            let announced = try #require(run.stderr.range(of: "recovering \(app)"))
            let refused = try #require(run.stderr.range(of: "Error:"), "\(run.stderr)")
            #expect(announced.lowerBound < refused.lowerBound, "\(run.stderr)")
            #expect(try await mock.requests()["Get Notification History", default: 0] >= 1)
        }
    }

    /// With several apps and environments and `--since-last`, each target's window is printed.
    @Test func everyWindowOfSeveralAppsAndTheScheduleIsPrinted() async throws {
        try await HistoryMock.with(["--customers", "4", "--span", "2d", "--app", "com.example.one:1234567890:production,sandbox"]) { mock in
            // Configured by the file alone (the mock's APP_STORE_* variables name only its first app).
            let run = try await runProcess("reconciler", ["run", "--since-last", "--overlap", "30m"], environment: mock.configurationFileEnvironment)
            #expect(run.status == 0, "\(run.stdout)\n\(run.stderr)")
            let windows = Self.windows(run.stderr)
            #expect(Set(windows.map(\.target)) == ["com.example.one (Production)", "com.example.one (Sandbox)"], "\(run.stderr)")
            #expect(windows.allSatisfy { $0.length == "30m" }, "\(run.stderr)")

            let dryRun = try await runProcess(
                "reconciler", ["run", "--start", "now-3h", "--end", "now-150m", "--dry-run", "--app", "com.example.one"],
                environment: mock.configurationFileEnvironment)
            #expect(dryRun.status == 0, "\(dryRun.stdout)\n\(dryRun.stderr)")
            #expect(Self.windows(dryRun.stderr).map(\.length) == ["30m", "30m"], "\(dryRun.stderr)")
            #expect(dryRun.stderr.contains("dry run, would recover com.example.one (Production): "), "\(dryRun.stderr)")
        }
    }

    /// The windows a run announced: `recovering APP (ENV): START → END (LENGTH)`, each end parsed back.
    static func windows(_ stderr: String) -> [(target: String, start: Timestamp, end: Timestamp, length: String)] {
        stderr.split(separator: "\n").compactMap { line in
            guard let match = line.firstMatch(of: /(?:recovering|would recover) (.+ \(\w+\)): (\S+) → (\S+) \((.+)\)$/),
                let start = Timestamp(parsing: String(match.2)), let end = Timestamp(parsing: String(match.3))
            else { return nil }
            return (String(match.1), start, end, String(match.4))
        }
    }
}
