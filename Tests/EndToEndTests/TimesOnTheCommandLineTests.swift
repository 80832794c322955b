import Foundation
import PostgresNIO
import TestSupport
import Testing

/// Times on the command line: strict ISO 8601 with a zone, UNIX milliseconds or
/// `now-<number><unit>`, anything else refused before anything is asked of Apple or written.
/// Real processes (`mock-appstore`, `reconciler`), a real PostgreSQL.
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
}
