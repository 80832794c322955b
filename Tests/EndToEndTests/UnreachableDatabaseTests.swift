import Crypto
import Foundation
import NIOHTTP1
import TestSupport
import Testing

/// A database a command cannot use ends it within `--database-timeout`, in one line that names the
/// host, the port and the cause, whatever the command: refused or unanswered exits 2 (it may pass:
/// a restart, a failover), a host name that does not resolve or a refused password exits 1. `serve`
/// says the same line but listens for a database that is away (Apple's deliveries get 503 and are
/// retried), and ends for one it cannot use as configured. The
/// PostgreSQL client's own errors show only with `--verbose`. Each process is given 60 s to catch a
/// hang (before, `status` and `migrate` took 67 s and printed 24 client errors).
@Suite struct UnreachableDatabaseTests: PasswordLeakTesting {
    /// Every command that uses the database, with what it needs besides one to get that far.
    static let everyCommand: [[String]] = [
        ["status"], ["migrate"], ["export"], ["changes"], ["rejections"], ["consumption", "list"], ["verify-stored"],
        ["compact-payloads"], ["prune", "--changes-older-than", "30d"],
        ["inspect", "--notification", "00000000-0000-0000-0000-000000000000"],
        ["run", "--since-last"], ["work", "--run", "1"], ["repair", "--transaction-id", "2000000000000001"],
        ["forward", "--once", "--forward-to", "http://127.0.0.1:9/apple", "--forward-unsigned"], ["detect-outage"],
    ]

    /// `reconciler <arguments> --database-timeout 2s` for the app com.example.app (sandbox) against `url`;
    /// Apple's API is a closed port, which no command reaches without a database.
    func reconciler(_ arguments: [String], url: String, timeout: String = "2s", in directory: TemporaryDirectory) async throws -> ProcessResult {
        try await RunningProcess(arguments, url: url, timeout: timeout, in: directory).wait(timeout: .seconds(60))
    }

    /// Runs each command at once against `url` (each waits its 2 s) and expects it to exit with
    /// `status`, printing one line (and nothing else) that names `words` and not the password.
    func expectOneLine(
        from commands: [[String]], against url: String, status: Int32, naming words: [String], in directory: TemporaryDirectory,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let results = try await withThrowingTaskGroup(of: ([String], ProcessResult).self) { group in
            for arguments in commands {
                group.addTask { (arguments, try await reconciler(arguments, url: url, in: directory)) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        for (arguments, result) in results {
            let lines = result.stderr.split(separator: "\n")
            #expect(result.status == status, "\(arguments): \(result.stderr)", sourceLocation: sourceLocation)
            #expect(lines.count == 1, "\(arguments) printed \(lines.count) lines: \(result.stderr)", sourceLocation: sourceLocation)
            for word in words {
                #expect(result.stderr.contains(word), "\(arguments): no \"\(word)\" in \(result.stderr)", sourceLocation: sourceLocation)
            }
            #expect(!Self.leaks(result.stdout + result.stderr), "\(arguments) printed the password", sourceLocation: sourceLocation)
        }
    }

    @Test func aClosedPortIsRefusedByEveryCommandWithExit2() async throws {
        try await TemporaryDirectory.with { directory in
            let port = freePort()
            try await expectOneLine(
                from: Self.everyCommand, against: "postgres://alice:\(Self.secret("x"))@127.0.0.1:\(port)/reconciler", status: 2,
                naming: ["127.0.0.1:\(port)", "connection refused"], in: directory)
        }
    }

    @Test func aServerThatNeverAnswersTimesOutWithExit2() async throws {
        try await TemporaryDirectory.with { directory in
            let silent = try SilentListener()
            try await expectOneLine(
                from: [["status"], ["migrate"], ["run", "--since-last"]],
                against: "postgres://alice:\(Self.secret("x"))@127.0.0.1:\(silent.port)/reconciler", status: 2,
                naming: ["127.0.0.1:\(silent.port)", "timed out"], in: directory)
        }
    }

    /// `serve` with its database away: one line naming it, then it listens anyway, /health 503;
    /// with a host name that does not resolve it ends at once with 1. (That such a serve still
    /// stops cleanly is GracefulShutdownTests.serveWithItsDatabaseAwayStopsCleanly, in process;
    /// serve's exit 0 on SIGTERM is LivePathCLITests.migrateServeExportAndInspect's.)
    @Test func serveListensForADatabaseThatIsAwayAndEndsForOneItCannotUse() async throws {
        try await TemporaryDirectory.with { directory in
            let (port, databasePort) = (freePort(), freePort())
            let serve = try RunningProcess(
                ["serve", "--host", "127.0.0.1", "--port", "\(port)"],
                url: "postgres://alice:\(Self.secret("x"))@127.0.0.1:\(databasePort)/reconciler", timeout: "2s", in: directory)
            try await serve.waitForOutput(containing: "listening")
            #expect(serve.stderr.contains("127.0.0.1:\(databasePort)") && serve.stderr.contains("connection refused"), "\(serve.stderr)")
            #expect((try await HTTP.request(.GET, "http://127.0.0.1:\(port)/health")).status == 503)
            serve.kill()
            #expect(!Self.leaks(serve.stdout + serve.stderr))

            let unresolved = try await reconciler(
                ["serve", "--host", "127.0.0.1", "--port", "\(freePort())"],
                url: "postgres://alice:\(Self.secret("x"))@nonexistent.invalid:5433/reconciler", in: directory)
            #expect(unresolved.status == 1, "\(unresolved.stderr)")
            #expect(unresolved.stderr.split(separator: "\n").count == 1 && unresolved.stderr.contains("not found"), "\(unresolved.stderr)")
        }
    }

    @Test func aHostNameThatDoesNotResolveExits1() async throws {
        try await TemporaryDirectory.with { directory in
            try await expectOneLine(
                from: [["status"], ["migrate"], ["run", "--since-last"]],
                against: "postgres://alice:\(Self.secret("x"))@nonexistent.invalid:5433/reconciler", status: 1,
                naming: ["nonexistent.invalid:5433", "not found"], in: directory)
        }
    }

    @Test func aRefusedPasswordExits1() async throws {
        try await TemporaryDirectory.with { directory in
            try await PrivateCluster.with(.init(passwordUsers: ["alice": Self.secret("right")])) { cluster in
                try await expectOneLine(
                    from: [["status"], ["migrate"], ["run", "--since-last"]],
                    against: "postgres://alice:\(Self.secret("wrong"))@127.0.0.1:\(cluster.port)/postgres", status: 1,
                    naming: ["127.0.0.1:\(cluster.port)", "authentication failed"], in: directory)
            }
        }
    }

    /// `--verbose` adds what the client logs of its own: each attempt with its raw error.
    @Test func verboseShowsTheClientsOwnErrors() async throws {
        try await TemporaryDirectory.with { directory in
            let port = freePort()
            let result = try await reconciler(["status", "--verbose"], url: "postgres://alice@127.0.0.1:\(port)/reconciler", in: directory)
            #expect(result.status == 2, "\(result.stderr)")
            let lines = result.stderr.split(separator: "\n")
            #expect(lines.count > 1, "\(result.stderr)")
            #expect(result.stderr.contains("connecting to the database failed"), "\(result.stderr)")
            #expect(result.stderr.contains("Connection refused"), "\(result.stderr)")
            #expect(
                lines.last?.hasPrefix("Error: database postgres://alice@127.0.0.1:\(port)/reconciler: connection refused") == true, "\(result.stderr)"
            )
        }
    }

    /// A database that comes back within the timeout (a restart, a failover) is waited for.
    @Test func aDatabaseBackWithinTheTimeoutIsWaitedFor() async throws {
        try await TemporaryDirectory.with { directory in
            try await PrivateCluster.with { cluster in
                try await cluster.stop()
                let migrate = try RunningProcess(["migrate", "--verbose"], url: cluster.url, timeout: "5m", in: directory)
                try await migrate.waitForOutput(containing: "connecting to the database failed")
                try await cluster.start()
                let result = try await migrate.wait(timeout: .seconds(60))
                #expect(result.status == 0, "\(result.stderr)")
                #expect(result.stdout.contains("applied"), "\(result.stdout)")
            }
        }
    }

    // A run interrupted while it waits for its database (exit 2, interrupted): in process,
    // GracefulShutdownTests.aFirstConnectionWaitingForTheDatabaseEndsAsAnInterruption.
}

extension RunningProcess {
    /// `reconciler <arguments> --database-timeout <timeout>` for the app com.example.app (sandbox)
    /// against the database `url`, at log level info; Apple's API is a closed port.
    fileprivate convenience init(_ arguments: [String], url: String, timeout: String, in directory: TemporaryDirectory) throws {
        let key = directory.file("key.p8")
        if !FileManager.default.fileExists(atPath: key) {
            try P256.Signing.PrivateKey().pemRepresentation.write(toFile: key, atomically: true, encoding: .utf8)
        }
        try self.init(
            "reconciler", arguments + ["--database-timeout", timeout],
            environment: [
                "DATABASE_URL": url, "APP_STORE_BUNDLE_ID": "com.example.app", "APP_STORE_ENVIRONMENT": "sandbox", "APP_STORE_KEY_ID": "K",
                "APP_STORE_ISSUER_ID": "I", "APP_STORE_PRIVATE_KEY_PATH": key, "APP_STORE_API_BASE_URL": "http://127.0.0.1:9",
                "LOG_LEVEL": "info", "LOG_FORMAT": "text",
            ])
    }
}
