import AppStoreServer
import AsyncHTTPClient
import Foundation
package import MockAppStore
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import Testing

/// A rehearsal of an outage with real processes: a fresh database, `mock-appstore` delivering
/// live traffic to `reconciler serve` outside an outage window, and `reconciler` commands run
/// against both, configured only through the mock's `reconciler.env`, as an operator would.
package struct Rehearsal {
    package let db: TestDatabase
    package let mockURL: String
    package let webhookURL: String
    package let environment: [String: String]
    package let outageStart: String
    package let outageEnd: String
    /// The live webhook, `reconciler serve`.
    package let serve: RunningProcess
    /// The mock's `--credentials-dir`: root.pem, the key, reconciler.env and reconciler.yaml.
    package let credentials: String
    /// The rehearsal's own temporary directory (the credentials are in it too), removed with it.
    package let directory: TemporaryDirectory

    /// A path in the rehearsal's temporary directory, for a report, a page or a key (nothing is created).
    package func file(_ name: String) -> String { directory.file(name) }

    /// Starts everything, waits for live delivery to finish, runs `body`, stops everything.
    /// `environment` is added to every `reconciler` process's; `serveArguments` to `reconciler serve`'s.
    /// With `configurationFile`, every process reads the mock's `reconciler.yaml`, changed first by
    /// `editConfiguration` when given (before `serve` starts).
    /// The outage is from `outageHoursAgo.start` to `outageHoursAgo.end` hours before now.
    package static func with(
        customers: Int = 60, seed: UInt64 = 3, mockArguments: [String] = [], databaseServer: String? = nil,
        environment extra: [String: String] = [:], serveArguments: [String] = [], configurationFile: Bool = false,
        editConfiguration: ((String) -> String)? = nil, outageHoursAgo: (start: Double, end: Double) = (6, 3),
        _ body: (Rehearsal) async throws -> Void
    ) async throws {
        try await TestDatabase.with(server: databaseServer) { db in
            let directory = try TemporaryDirectory.create("rehearsal")
            defer { directory.remove() }
            let now = Date()
            let outageStart = ISO8601DateFormatter().string(from: now.addingTimeInterval(-outageHoursAgo.start * 3600))
            let outageEnd = ISO8601DateFormatter().string(from: now.addingTimeInterval(-outageHoursAgo.end * 3600))
            for attempt in 1...3 {
                let credentials = directory.file("credentials-\(attempt)")
                let servePort = freePort()
                let webhookURL = "http://127.0.0.1:\(servePort)/notifications"
                let mock = try RunningProcess(
                    "mock-appstore",
                    [
                        "--port", "0", "--seed", "\(seed)", "--customers", "\(customers)", "--outage-start", outageStart,
                        "--outage-end", outageEnd, "--webhook", webhookURL, "--credentials-dir", credentials, "--log-level", "warning",
                        // Under the load of the parallel tests, a POST the mock gave up on after
                        // 10 s was stored by serve after the test had read the state.
                        "--delivery-timeout", "300",
                    ] + mockArguments)
                defer { mock.kill() }
                try await mock.waitForOutput(containing: "listening on http://")
                let mockURL = try MockAppStoreProcess.url(mock)
                var environment = ["DATABASE_URL": db.url, "LOG_LEVEL": "warning"].merging(extra) { $1 }
                if configurationFile {
                    // Every app and environment the mock serves, from the file it writes.
                    let file = "\(credentials)/reconciler.yaml"
                    if let editConfiguration {
                        try editConfiguration(try String(contentsOfFile: file, encoding: .utf8)).write(
                            toFile: file, atomically: true, encoding: .utf8)
                    }
                    environment["RECONCILER_CONFIG"] = file
                } else {
                    environment.merge(try MockAppStoreProcess.reconcilerEnvironment(credentials: credentials)) { $1 }
                }
                let serve = try RunningProcess(
                    "reconciler",
                    ["serve", "--port", "\(servePort)", "--host", "127.0.0.1", "--metrics-interval", "1s"]
                        + serveArguments,
                    environment: environment)
                defer { serve.kill() }
                do {
                    try await mock.waitForOutput(containing: "live delivery complete", alongside: [serve])
                } catch {
                    // Another process took the free port between its choice and serve's bind: choose again.
                    guard attempt < 3, serve.stderr.contains("Address already in use") else { throw error }
                    continue
                }
                try await body(
                    Rehearsal(
                        db: db, mockURL: mockURL, webhookURL: webhookURL, environment: environment,
                        outageStart: outageStart, outageEnd: outageEnd, serve: serve, credentials: credentials, directory: directory))
                return
            }
        }
    }

    /// Runs `reconciler` with the rehearsal's configuration.
    package func reconciler(_ arguments: [String], environment extra: [String: String] = [:]) async throws -> ProcessResult {
        try await runProcess("reconciler", arguments, environment: environment.merging(extra) { $1 })
    }

    /// Starts `reconciler` without waiting for it.
    package func start(_ arguments: [String]) throws -> RunningProcess {
        try RunningProcess("reconciler", arguments, environment: environment)
    }

    /// `run` over the outage window.
    package func runWindow(_ extra: [String] = []) async throws -> ProcessResult {
        try await reconciler(["run", "--start", outageStart, "--end", outageEnd] + extra)
    }

    /// The moment `entitled` is judged at in both the truth and the export, so they compare.
    package static let moment = Int64(Date().timeIntervalSince1970 * 1000)

    package func truth() async throws -> String {
        String(decoding: try await HTTP.request(.GET, "\(mockURL)/mock/truth?at=\(Self.moment)").body, as: UTF8.self)
    }

    package func export() async throws -> String {
        let result = try await reconciler(["export", "--at", String(Self.moment)])
        #expect(result.status == 0, "export: \(result.stderr)")
        return result.stdout
    }

    /// Every notification of the mock's scenario, as `GET /mock/notifications` lists them.
    package func mockNotifications() async throws -> [MockAppStore.NotificationLine] {
        try await MockAppStoreProcess.notifications(mockURL)
    }

    package func mockStatistics() async throws -> [String: Any] {
        try await HTTP.request(.GET, "\(mockURL)/mock/stats").json
    }

    package func resetMockStatistics() async throws {
        _ = try await HTTP.request(.POST, "\(mockURL)/mock/stats/reset")
    }

    package func setFaults(_ faults: [String: Any]) async throws {
        _ = try await HTTP.request(.POST, "\(mockURL)/mock/faults", body: try JSONSerialization.data(withJSONObject: faults))
    }

    /// Lines that differ between the export and the truth, for a readable failure.
    package static func difference(_ export: String, _ truth: String) -> String {
        let exported = Set(export.split(separator: "\n")), expected = Set(truth.split(separator: "\n"))
        let missing = expected.subtracting(exported).sorted().prefix(5).map { "  want \($0)" }
        let extra = exported.subtracting(expected).sorted().prefix(5).map { "  got  \($0)" }
        return (missing + extra).joined(separator: "\n")
    }

    /// The report a `--report-json` file holds.
    package static func report(_ path: String) throws -> [String: Any] {
        try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any] ?? [:]
    }

    /// A configuration file like the mock's `reconciler.yaml`, changed by `edit`, in the credentials
    /// directory (removed with it); returns its path.
    package func configurationFile(_ name: String, _ edit: (String) -> String) throws -> String {
        let path = "\(credentials)/\(name).yaml"
        try edit(try String(contentsOfFile: "\(credentials)/reconciler.yaml", encoding: .utf8)).write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }
}
