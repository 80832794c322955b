import Foundation
import MockAppStore
import Reconciler
import ReconcilerDomain
import TestSupport
import Testing

@testable import ReconcilerStore

/// Database passwords never reach output, whatever the URL looks like. Every password
/// here is two distinctive halves around the characters that break URL parsers, so a test sees a partial
/// leak too: neither half may appear.
@Suite struct DatabaseSecretsTests: PasswordLeakTesting {

    /// The real `reconciler`, with a server that asks for the password (scram-sha-256), at trace level.
    @Test func noCommandPrintsThePassword() async throws {
        try await TemporaryDirectory.with { directory in
            let password = Self.secret("%t#@/?: '\"&=")
            let encoded = password.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            try await PrivateCluster.with(.init(passwordUsers: ["alice": password])) { cluster in
                let host = "127.0.0.1:\(cluster.port)"
                let app = try TestApp()
                let roots = directory.file("roots.pem")
                try app.authority.rootPEM.write(toFile: roots, atomically: true, encoding: .utf8)
                let base = [
                    "APP_STORE_BUNDLE_ID": TestApp.bundleId, "APP_STORE_APP_APPLE_ID": String(TestApp.appAppleId),
                    "APP_STORE_ENVIRONMENT": "production", "APP_STORE_ROOT_CERTIFICATES": roots, "LOG_LEVEL": "trace",
                ]
                func check(_ arguments: [String], url: String, status expected: Int32, viaFlag: Bool = false) async throws {
                    let environment = base.merging(["DATABASE_URL": viaFlag ? "" : url]) { $1 }
                    let result = try await runProcess("reconciler", arguments + (viaFlag ? ["--database-url", url] : []), environment: environment)
                    #expect(result.status == expected, "\(arguments) \(DatabaseSettings.redacted(url)): \(result.stderr.suffix(1500))")
                    #expect(!Self.leaks(result.stdout + result.stderr), "\(arguments) \(DatabaseSettings.redacted(url)) printed the password")
                }
                // Right password, percent-encoded, in the userinfo and as a query parameter: the commands work.
                let good = "postgres://alice:\(encoded)@\(host)/postgres"
                try await check(["migrate"], url: good, status: 0)
                try await check(["status"], url: good, status: 0)
                try await check(["export"], url: "postgres://alice@\(host)/postgres?password=\(encoded)&sslmode=prefer", status: 0)
                try await check(["migrate", "--status"], url: good, status: 0, viaFlag: true)

                // serve's "listening" line names the database.
                let serve = try RunningProcess(
                    "reconciler", ["serve", "--port", "\(freePort())", "--host", "127.0.0.1"],
                    environment: base.merging(["DATABASE_URL": good]) { $1 })
                try await serve.waitForOutput(containing: "listening")
                // What it printed is read from its files: how it ends is LivePathCLITests' (SIGTERM, exit 0).
                serve.kill()
                #expect(serve.stderr.contains("alice:***@127.0.0.1"))
                #expect(!Self.leaks(serve.stdout + serve.stderr))

                // Wrong password: refused by the server, exit 1, no password either way.
                let wrong = "postgres://alice:\(Self.secret("x"))@\(host)/postgres"
                for command in [["migrate"], ["status"], ["export"]] { try await check(command, url: wrong, status: 1) }

                // Unencoded passwords, keyword/value strings, other schemes: refused before connecting, exit 1.
                let nasty = [
                    "postgres://alice:\(password)@\(host)/postgres",
                    "postgres://alice:\(Self.secret("%t#x"))@\(host)/postgres",
                    "postgres://alice:\(Self.secret("@"))@\(host)/postgres",
                    "postgres://\(host)/postgres?password=\(Self.secret("@"))#x",
                    "postgres://alice:\(Self.secret("%"))@\(host)/postgres?sslmode=bogus",
                    "host=127.0.0.1 port=\(cluster.port) user=alice password='\(Self.secret(" "))'",
                    "http://alice:\(Self.secret("#"))@\(host)/",
                    Self.secret(":"),
                ]
                for url in nasty {
                    for command in [["migrate"], ["status"], ["export"], ["serve", "--port", "\(freePort())"]] {
                        try await check(command, url: url, status: 1)
                    }
                }
                try await check(["migrate"], url: nasty[0], status: 1, viaFlag: true)
            }
        }
    }

}
