import Foundation
import TestSupport
import Testing

/// Hints name where the settings they ask to check came from: the configuration file's path and
/// keys when the file set them (the 401 named the `APP_STORE_*` variables), the variables when
/// they did. Real processes (`mock-appstore`, `reconciler`), a real PostgreSQL.
@Suite(.serialized) struct SettingHintsTests {
    /// A key Apple refuses for an app of the configuration file: every command that calls Apple
    /// names the file's keys that set the key and the app, and no variable.
    @Test func aRefusedKeyNamesTheConfigurationFilesKeys() async throws {
        try await HistoryMock.with([
            "--customers", "4", "--span", "2d", "--app", "com.example.one:1234567890:production", "--app", "com.example.two:2345678901:production",
            "--unauthorized-app", "com.example.two",
        ]) { mock in
            let file = "\(mock.credentials)/reconciler.yaml"
            let settings = "key.id, key.issuer, key.privateKeyPath and apps[1].bundleId in \(file)"
            let commands: [[String]] = [
                ["run", "--start", "now-2h", "--end", "now-1h"],
                ["run", "--start", "now-2h", "--end", "now-1h", "--app", "com.example.two"],
                ["detect-outage", "--since", "1d", "--app", "com.example.two"],
                ["check-webhook", "--app", "com.example.two", "--timeout", "5"],
                ["repair", "--transaction-id", "2000000000000001", "--app", "com.example.two"],
            ]
            for arguments in commands {
                // Configured by the file alone (the mock's APP_STORE_* variables name its first app).
                let refused = try await runProcess("reconciler", arguments, environment: mock.configurationFileEnvironment)
                let output = refused.stdout + refused.stderr
                #expect(refused.status == 1, "\(arguments): \(output)")
                #expect(output.contains("unauthorized") && output.contains(settings), "\(arguments): \(output)")
                #expect(!output.contains("APP_STORE_"), "\(arguments): \(output)")
            }
        }
    }

    /// A `.p8` that cannot be read or is no key: the error names the setting that names the file,
    /// the configuration file's key and path (the team's key, or one app's), or the variable.
    @Test func aKeyFileThatCannotBeUsedNamesTheSettingThatNamesIt() async throws {
        try await TemporaryDirectory.with { directory in
            let missing = directory.file("secrets/AuthKey_2X9R4HXF34.p8")
            let notAKey = directory.file("AuthKey_NOTAKEY.p8")
            try "not a key\n".write(toFile: notAKey, atomically: true, encoding: .utf8)
            func file(_ name: String, _ yaml: String) throws -> String {
                let path = directory.file(name)
                try yaml.write(toFile: path, atomically: true, encoding: .utf8)
                return path
            }
            let app = "apps:\n  - bundleId: com.example.one\n    appAppleId: 1234567890\n    environments: [sandbox]\n"
            let key = { (path: String, indent: String) in
                "\(indent)key:\n\(indent)  id: 2X9R4HXF34\n\(indent)  issuer: 57246542-96fe-1a63-e053-0824d011072a\n\(indent)  privateKeyPath: \(path)\n"
            }
            let team = try file("team.yaml", key(missing, "") + app)
            let perApp = try file("per-app.yaml", app + key(missing, "    "))
            let garbage = try file("garbage.yaml", key(notAKey, "") + app)
            let cases: [([String: String], [String])] = [
                (["RECONCILER_CONFIG": team], ["key.privateKeyPath in \(team)", missing]),
                (["RECONCILER_CONFIG": perApp], ["apps[0].key.privateKeyPath in \(perApp)", missing]),
                (["RECONCILER_CONFIG": garbage], ["key.privateKeyPath in \(garbage)", notAKey, "is not a P-256 private key"]),
                (
                    [
                        "APP_STORE_BUNDLE_ID": "com.example.one", "APP_STORE_ENVIRONMENT": "sandbox", "APP_STORE_KEY_ID": "2X9R4HXF34",
                        "APP_STORE_ISSUER_ID": "57246542-96fe-1a63-e053-0824d011072a", "APP_STORE_PRIVATE_KEY_PATH": missing,
                    ], ["APP_STORE_PRIVATE_KEY_PATH", missing]
                ),
            ]
            for (environment, named) in cases {
                // No database: the key is read before anything else.
                let refused = try await runProcess(
                    "reconciler", ["detect-outage", "--since", "1d"], environment: environment.merging(["DATABASE_URL": ""]) { $1 })
                #expect(refused.status == 1, "\(environment): \(refused.stderr)")
                for text in named { #expect(refused.stderr.contains(text), "\(text) in: \(refused.stderr)") }
            }
        }
    }
}
