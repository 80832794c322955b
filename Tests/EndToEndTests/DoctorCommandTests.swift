import Foundation
import NIOHTTP1
import PostgresNIO
import TestSupport
import Testing

/// `reconciler doctor` as an operator runs it: the real `reconciler` and `mock-appstore`
/// processes, a real PostgreSQL. Each thing broken alone fails (or warns) with its own fix line.
@Suite(.serialized) struct DoctorCommandTests {
    static let apps = [
        "--customers", "2", "--span", "2d", "--app", "com.example.one:1234567890:production,sandbox", "--app",
        "com.example.two:2345678901:production",
    ]

    struct Item: Decodable, Hashable {
        var check: String
        var app: String?
        var environment: String?
        var status: String
        var detail: String
        var fix: String?
    }

    static func doctor(_ mock: HistoryMock, _ arguments: [String] = [], environment extra: [String: String] = [:]) async throws -> (Int32, [Item]) {
        let result = try await runProcess(
            "reconciler", ["doctor", "--json"] + arguments, environment: mock.configurationFileEnvironment.merging(extra) { $1 })
        let items = try JSONDecoder().decode([Item].self, from: Data(result.stdout.utf8))
        return (result.status, items)
    }

    static func faults(_ mock: HistoryMock, _ json: String) async throws {
        let reply = try await HTTP.request(.POST, "\(mock.url)/mock/faults", body: Data(json.utf8))
        #expect(reply.status == 200)
    }

    /// `reconciler.yaml` without its `notificationURL` (the README's integration where the app's
    /// own handler stays Apple's URL; no `serve` runs here for serve-health).
    static func withoutNotificationURL(_ mock: HistoryMock) throws {
        let file = "\(mock.credentials)/reconciler.yaml"
        let yaml = try String(contentsOfFile: file, encoding: .utf8)
        try yaml.split(separator: "\n").filter { !$0.hasPrefix("notificationURL:") }.joined(separator: "\n").appending("\n")
            .write(toFile: file, atomically: true, encoding: .utf8)
    }

    static func connectApps(_ mock: HistoryMock) async throws -> String {
        String(decoding: try await HTTP.request(.GET, "\(mock.url)/mock/app-store-connect").body, as: UTF8.self)
    }

    /// The drill's setup: every check ok, exit 0; the lines hold no secret (the database URL's
    /// password, the key).
    @Test func everyCheckPassesOnTheDrillsSetup() async throws {
        try await HistoryMock.with(Self.apps) { mock in
            try Self.withoutNotificationURL(mock)
            var components = URLComponents(string: mock.db.url)!
            components.password = "pa55word-never-shown"
            let environment = ["DATABASE_URL": components.string!]
            let (status, items) = try await Self.doctor(mock, environment: environment)
            #expect(status == 0, "\(items.filter { $0.status != "ok" })")
            #expect(items.allSatisfy { $0.status == "ok" && $0.fix == nil })
            #expect(
                Set(items.map(\.check)) == [
                    "config", "key-file", "root-certificates", "database", "migrations", "idle-transactions", "feed", "forward-queue", "apple-auth",
                    "clock",
                    "notification-urls",
                ])
            let auth = items.filter { $0.check == "apple-auth" }.map { "\($0.app ?? "") \($0.environment ?? "")" }
            #expect(auth == ["com.example.one Production", "com.example.one Sandbox", "com.example.two Production"])
            #expect(items.first { $0.check == "database" }?.app == nil)
            let text = try await runProcess("reconciler", ["doctor"], environment: mock.configurationFileEnvironment.merging(environment) { $1 })
            #expect(text.status == 0)
            #expect(text.stdout.split(separator: "\n").dropLast().allSatisfy { $0.hasPrefix("ok   ") }, "\(text.stdout)")
            let key = try String(contentsOfFile: try #require(Self.keyFile(in: mock.credentials)), encoding: .utf8)
            for secret in ["pa55word-never-shown"] + key.split(separator: "\n").filter { !$0.hasPrefix("-----") }.map(String.init) {
                #expect(!(text.stdout + text.stderr).contains(secret))
            }
        }
    }

    /// `--send-test` with no `serve` at the URL Apple calls: the TEST notification is not
    /// delivered, so its line fails with the fix; without the flag no test is requested.
    @Test func aTestNotificationThatDoesNotArriveFailsWithItsFix() async throws {
        try await HistoryMock.with(Self.apps) { mock in
            try Self.withoutNotificationURL(mock)
            let (quiet, plain) = try await Self.doctor(mock, ["--app", "com.example.two"])
            #expect(quiet == 0 && !plain.contains { $0.check == "test-notification" }, "\(plain)")
            let (status, items) = try await Self.doctor(mock, ["--app", "com.example.two", "--send-test", "--timeout", "5"])
            let tests = items.filter { $0.check == "test-notification" }
            #expect(status == 1, "\(items)")
            #expect(tests.count == 1 && tests.allSatisfy { $0.status == "fail" && $0.app == "com.example.two" }, "\(tests)")
            #expect(tests.first?.fix?.contains("serve") == true, "\(tests)")
        }
    }

    /// Apple's side broken one way at a time through the mock: the 401 fix names the likely
    /// cause by what the other apps and environments saw; the clock by the `Date` header.
    @Test func eachAppleBreakageHasItsOwnFixLine() async throws {
        try await HistoryMock.with(Self.apps) { mock in
            try Self.withoutNotificationURL(mock)
            // One app refused while the other passes with the same key.
            try await Self.faults(mock, #"{"unauthorizedApps": ["com.example.two"]}"#)
            var (status, items) = try await Self.doctor(mock)
            #expect(status == 1)
            var failed = items.filter { $0.status == "fail" }
            #expect(failed.map(\.check) == ["apple-auth"])
            #expect(failed.first?.app == "com.example.two")
            #expect(failed.first?.fix?.contains("does not cover com.example.two") == true)
            #expect(failed.first?.fix?.hasPrefix("Likely") == true)

            // Production refused while the sandbox answers: no release yet, likely.
            try await Self.faults(mock, #"{"unauthorizedApps": ["com.example.one:production"]}"#)
            (status, items) = try await Self.doctor(mock, ["--app", "com.example.one"])
            failed = items.filter { $0.status == "fail" }
            #expect(status == 1)
            #expect(failed.map { "\($0.check) \($0.environment ?? "")" } == ["apple-auth Production"])
            #expect(failed.first?.fix?.contains("Likely the app has no production release yet") == true)

            // Every app refused: the key itself.
            try await Self.faults(mock, #"{"unauthorizedApps": ["com.example.one", "com.example.two"]}"#)
            (status, items) = try await Self.doctor(mock)
            failed = items.filter { $0.status == "fail" }
            #expect(failed.count == 3)
            #expect(failed.allSatisfy { $0.fix?.contains("the key ID, the issuer ID or the .p8 file") == true })

            // The host's clock 2 minutes behind Apple's: a warning, exit 4; 10 minutes: a failure.
            try await Self.faults(mock, #"{"dateSkewSeconds": 120}"#)
            (status, items) = try await Self.doctor(mock)
            #expect(status == 4)
            #expect(items.filter { $0.status != "ok" }.map { "\($0.check) \($0.status)" } == ["clock warn"])
            try await Self.faults(mock, #"{"dateSkewSeconds": -600}"#)
            (status, items) = try await Self.doctor(mock)
            #expect(status == 1)
            let clock = try #require(items.first { $0.check == "clock" })
            #expect(clock.status == "fail")
            #expect(clock.detail.contains("ahead of Apple's"))
        }
    }

    /// The deployment broken one way at a time: a migration not applied, then the app API's
    /// token file missing; each fails with its fix, exit 1.
    @Test func eachSetupBreakageHasItsOwnFixLine() async throws {
        try await HistoryMock.with(Self.apps) { mock in
            try Self.withoutNotificationURL(mock)
            // The newest migration's row taken out and put back: its SQL is not run twice.
            try await mock.db.execute(
                "CREATE TABLE taken_out AS SELECT * FROM schema_migrations WHERE version = (SELECT max(version) FROM schema_migrations)")
            try await mock.db.execute("DELETE FROM schema_migrations WHERE version = (SELECT version FROM taken_out)")
            var (status, items) = try await Self.doctor(mock)
            #expect(status == 1)
            var failed = items.filter { $0.status != "ok" }
            #expect(failed.map(\.check) == ["migrations"])
            #expect(failed.first?.fix?.contains("reconciler migrate") == true)
            try await mock.db.execute("INSERT INTO schema_migrations SELECT * FROM taken_out")
            try await mock.db.execute("DROP TABLE taken_out")

            let file = "\(mock.credentials)/reconciler.yaml"
            let yaml = try String(contentsOfFile: file, encoding: .utf8)
            try (yaml + "\nappApi: {tokenFile: \(mock.credentials)/no-such-token}\n").write(toFile: file, atomically: true, encoding: .utf8)
            (status, items) = try await Self.doctor(mock)
            #expect(status == 1)
            failed = items.filter { $0.status != "ok" }
            #expect(failed.map(\.check) == ["app-api-token-file"])
            #expect(failed.first?.fix?.contains("appApi.tokenFile") == true)
        }
    }

    /// App Store Connect's notification settings broken one way at a time through the mock (a
    /// wrong production URL, a sandbox in Version 1): each fails with the fix; `--dry-run` prints
    /// the change and changes nothing; `--fix-notification-urls` changes exactly the wrong values;
    /// without notificationURL it refuses.
    @Test func theNotificationURLsAreCheckedAndFixed() async throws {
        try await HistoryMock.with(Self.apps) { mock in
            let wanted = "http://127.0.0.1:8080/notifications"
            func urls(_ items: [Item]) -> [String] {
                items.filter { $0.check == "notification-urls" }.map { "\($0.app ?? "") \($0.environment ?? "") \($0.status)" }
            }
            var (_, items) = try await Self.doctor(mock)
            #expect(
                urls(items) == [
                    "com.example.one Production ok", "com.example.one Sandbox ok", "com.example.two Production ok", "com.example.two Sandbox ok",
                ])
            let good = try await Self.connectApps(mock)
            _ = try await HTTP.request(
                .POST, "\(mock.url)/mock/app-store-connect?bundleId=com.example.two",
                body: Data(#"{"subscriptionStatusUrl": "https://old.example.com/apple"}"#.utf8))
            _ = try await HTTP.request(
                .POST, "\(mock.url)/mock/app-store-connect?bundleId=com.example.one",
                body: Data(#"{"subscriptionStatusUrlVersionForSandbox": "V1"}"#.utf8))
            var status: Int32
            (status, items) = try await Self.doctor(mock)
            #expect(status == 1)
            #expect(
                urls(items) == [
                    "com.example.one Production ok", "com.example.one Sandbox fail", "com.example.two Production fail", "com.example.two Sandbox ok",
                ])
            let wrong = items.first { $0.check == "notification-urls" && $0.status == "fail" && $0.app == "com.example.two" }
            #expect(wrong?.detail.contains("https://old.example.com/apple") == true)
            #expect(wrong?.fix?.contains("--fix-notification-urls") == true)
            let broken = try await Self.connectApps(mock)

            let dry = try await runProcess(
                "reconciler", ["doctor", "--fix-notification-urls", "--dry-run"], environment: mock.configurationFileEnvironment)
            #expect(
                dry.stdout.contains("would change com.example.two: subscriptionStatusUrl https://old.example.com/apple → \(wanted)"), "\(dry.stdout)")
            #expect(dry.stdout.contains("would change com.example.one: subscriptionStatusUrlVersionForSandbox V1 → V2"))
            #expect(try await Self.connectApps(mock) == broken)

            let fixed = try await runProcess("reconciler", ["doctor", "--fix-notification-urls"], environment: mock.configurationFileEnvironment)
            #expect(fixed.stdout.split(separator: "\n").filter { $0.hasPrefix("changing ") }.count == 2, "\(fixed.stdout)")
            #expect(try await Self.connectApps(mock) == good)
            (_, items) = try await Self.doctor(mock)
            #expect(urls(items).allSatisfy { $0.hasSuffix(" ok") })

            try Self.withoutNotificationURL(mock)
            let refused = try await runProcess("reconciler", ["doctor", "--fix-notification-urls"], environment: mock.configurationFileEnvironment)
            #expect(refused.status == 1)
            #expect(refused.stderr.contains("needs notificationURL"))
        }
    }

    static func keyFile(in directory: String) -> String? {
        (try? FileManager.default.contentsOfDirectory(atPath: directory))?.first { $0.hasSuffix(".p8") }.map { "\(directory)/\($0)" }
    }
}
