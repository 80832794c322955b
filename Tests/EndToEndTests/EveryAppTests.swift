import Foundation
import PostgresNIO
import TestSupport
import Testing

/// Two apps under one team key, one of them in both environments, on one `serve` URL and one
/// `run`, configured by the configuration file the mock writes (`reconciler.yaml`), as Apple
/// delivers: sandbox notifications arrive at the production URL.
@Suite struct EveryAppTests {
    static let one = "com.example.one"
    static let two = "com.example.two"
    /// The same transaction IDs in every app and environment: only the app and environment tell purchases apart.
    static let mockArguments = [
        "--app", "\(one):1234567890:production,sandbox", "--app", "\(two):2345678901:production", "--shared-transaction-ids", "--forged", "2",
    ]

    /// The apps and environments of an export's or the truth's lines, with how many purchases each has.
    static func groups(_ lines: String) throws -> [String: Int] {
        var groups: [String: Int] = [:]
        for line in lines.split(separator: "\n") {
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] ?? [:]
            groups["\(object["bundleId"] ?? "?")/\(object["environment"] ?? "?")", default: 0] += 1
        }
        return groups
    }

    @Test func oneServeAndOneRunRecoverEveryAppAndEnvironmentToTheTruth() async throws {
        try await Rehearsal.with(customers: 12, seed: 23, mockArguments: Self.mockArguments, configurationFile: true) { rehearsal in
            let expected = ["\(Self.one)/Production", "\(Self.one)/Sandbox", "\(Self.two)/Production"]
            // Live traffic of every app and environment came to the one URL and was stored under its own.
            let live = try Self.groups(try await rehearsal.export())
            #expect(Set(live.keys) == Set(expected), "\(live)")
            let webhookRejections = try await rehearsal.db.count("SELECT count(*) FROM quarantined_payloads")
            #expect(webhookRejections == 0)

            try await rehearsal.resetMockStatistics()
            let reportPath = rehearsal.file("every-app.json")
            defer { try? FileManager.default.removeItem(atPath: reportPath) }
            let run = try await rehearsal.runWindow(["--report-json", reportPath])
            // The forged payloads need a person (4); everything genuine is recovered.
            #expect(run.status == 4, "\(run.stdout)\n\(run.stderr)")
            for target in ["\(Self.one) (Production)", "\(Self.one) (Sandbox)", "\(Self.two) (Production)"] {
                #expect(run.stdout.contains("== \(target)"), "\(run.stdout)")
            }
            let export = try await rehearsal.export(), truth = try await rehearsal.truth()
            #expect(export == truth, "\(Rehearsal.difference(export, truth))")
            #expect(Set(try Self.groups(truth).keys) == Set(expected))

            // No request for one app's customer carried another app's `bid`. With shared IDs the mock sees such a
            // request only for an ID the other app lacks; the export's equality with the truth is what catches the rest,
            // and EveryAppCommandsTests checks the counter with every app's IDs its own.
            let statistics = try await rehearsal.mockStatistics()
            #expect(statistics["crossAppRequests"] as? Int == 0, "\(statistics)")

            // One report per app and environment; the forged payloads quarantined under the first app's production only.
            let targets = (try Rehearsal.report(reportPath)["targets"] as? [[String: Any]]) ?? []
            #expect(Set(targets.map { "\($0["bundleId"] ?? "?")/\($0["environment"] ?? "?")" }) == Set(expected), "\(targets)")
            for target in targets {
                let rejections = (target["rejections"] as? [[String: Any]]) ?? []
                let first = target["bundleId"] as? String == Self.one && target["environment"] as? String == "Production"
                #expect(rejections.count == (first ? 2 : 0), "\(target["bundleId"] ?? "?") \(target["environment"] ?? "?")")
            }
            let quarantined = try await rehearsal.db.count(
                "SELECT count(*) FROM quarantined_payloads WHERE bundle_id = \(Self.one) AND environment = 'Production'")
            #expect(quarantined == 2)
            #expect(try await rehearsal.db.count("SELECT count(*) FROM quarantined_payloads") == 2)

            // The same window again changes nothing and needs no one.
            let again = try await rehearsal.runWindow()
            #expect(again.status == 0, "\(again.stdout)\n\(again.stderr)")
            #expect(try await rehearsal.export() == truth)
        }
    }

    /// One `run` recovers every app at once, each in its own run (their runs overlap in time,
    /// where one after the other would make the second wait for the first), and prints each app's
    /// report after all of them, in the configuration's order.
    @Test func everyAppIsRecoveredAtOnceAndReportedInTheConfigurationsOrder() async throws {
        let apps = ["--app", "\(Self.one):1234567890:production", "--app", "\(Self.two):2345678901:production"]
        try await Rehearsal.with(customers: 10, seed: 37, mockArguments: apps, configurationFile: true) { rehearsal in
            // Every request takes a while, so each run lasts seconds.
            try await rehearsal.setFaults(["latencyMilliseconds": 150])
            let run = try await rehearsal.runWindow(["--concurrency", "1", "--gap-concurrency", "1"])
            #expect(run.status == 0, "\(run.stdout)\n\(run.stderr)")
            let rows = try await rehearsal.db.client.query(
                """
                SELECT bundle_id, extract(epoch FROM started_at)::float8, extract(epoch FROM finished_at)::float8
                FROM reconcile_runs ORDER BY bundle_id
                """, logger: TestDatabase.logger)
            var spans: [String: (start: Double, end: Double)] = [:]
            for try await (bundleId, started, finished) in rows.decode((String, Double, Double).self) { spans[bundleId] = (started, finished) }
            let one = try #require(spans[Self.one]), two = try #require(spans[Self.two])
            #expect(one.start < two.end && two.start < one.end, "the runs did not overlap: \(spans)")
            let first = try #require(run.stdout.range(of: "== \(Self.one) (Production)"))
            let second = try #require(run.stdout.range(of: "== \(Self.two) (Production)"))
            #expect(first.lowerBound < second.lowerBound, "\(run.stdout)")
            // Each app's share of its budget was given back when its work ended.
            #expect(try await rehearsal.db.count("SELECT count(*) FROM api_processes WHERE lease_until > now()") == 0)
        }
    }

    /// One app of the file narrowed with --app and --environment: only its run is made.
    @Test func appAndEnvironmentNarrowARunToOneTarget() async throws {
        try await Rehearsal.with(customers: 6, seed: 29, mockArguments: Self.mockArguments, configurationFile: true) { rehearsal in
            let run = try await rehearsal.runWindow(["--app", Self.one, "--environment", "sandbox"])
            #expect(run.status == 0, "\(run.stdout)\n\(run.stderr)")
            #expect(!run.stdout.contains("== "), "one target prints no headers: \(run.stdout)")
            #expect(try await rehearsal.db.count("SELECT count(*) FROM reconcile_runs") == 1)
            #expect(
                try await rehearsal.db.count(
                    "SELECT count(*) FROM reconcile_runs WHERE bundle_id = \(Self.one) AND environment = 'Sandbox'") == 1)
            let unknown = try await rehearsal.runWindow(["--app", "com.example.three"])
            #expect(unknown.status == 1)
            #expect(unknown.stderr.contains("com.example.three"), "\(unknown.stderr)")
        }
    }

    /// A key that does not cover one app: that app's 401 is its configuration error (exit 1, named),
    /// and the other apps and environments are recovered all the same.
    @Test func aKeyRefusedForOneAppStopsOnlyThatApp() async throws {
        try await Rehearsal.with(
            customers: 6, seed: 31, mockArguments: Self.mockArguments + ["--unauthorized-app", Self.two], configurationFile: true
        ) { rehearsal in
            let run = try await rehearsal.runWindow()
            #expect(run.status == 1, "\(run.stdout)\n\(run.stderr)")
            #expect(run.stderr.contains("\(Self.two) (Production) was not recovered"), "\(run.stdout)\n\(run.stderr)")
            let recovered = Set(["\(Self.one)/Production", "\(Self.one)/Sandbox"])
            func lines(_ text: String) throws -> [String] {
                try text.split(separator: "\n").map(String.init).filter { line in
                    let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] ?? [:]
                    return recovered.contains("\(object["bundleId"] ?? "?")/\(object["environment"] ?? "?")")
                }
            }
            let export = try lines(try await rehearsal.export()).joined(separator: "\n")
            let truth = try lines(try await rehearsal.truth()).joined(separator: "\n")
            #expect(!truth.isEmpty)
            #expect(export == truth, "\(Rehearsal.difference(export, truth))")
        }
    }
}
