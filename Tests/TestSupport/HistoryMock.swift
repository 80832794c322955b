import Foundation
package import MockAppStore
import NIOHTTP1
import Testing

/// `mock-appstore` as a real process without a webhook (no live traffic to wait for, no `reconciler
/// serve`) and a fresh database: for tests about what `reconciler run` asks of Get Notification
/// History, judged by what the mock itself counted and by its own list of notifications.
///
/// ```swift
/// try await HistoryMock.with(["--customers", "20", "--span", "10d"]) { mock in
///     let run = try await mock.reconciler(["run", "--start", "now-9d", "--end", "now-1h"])
///     let perQuery = try await mock.historyRequestsByFilter()
/// }
/// ```
package struct HistoryMock {
    package let db: TestDatabase
    package let url: String
    package let environment: [String: String]
    /// The mock's credentials directory: `reconciler.yaml` there names every app and environment it serves.
    package let credentials: String

    /// Starts the mock with `arguments` (port, credentials and log level are set here), waits until
    /// it is ready, runs `body`, then stops it and removes its credentials.
    package static func with(_ arguments: [String], _ body: (HistoryMock) async throws -> Void) async throws {
        try await TestDatabase.with { db in
            let directory = try TemporaryDirectory.create("mock")
            defer { directory.remove() }
            let credentials = directory.path
            let mock = try RunningProcess(
                "mock-appstore", ["--port", "0", "--credentials-dir", credentials, "--log-level", "warning"] + arguments)
            defer { mock.kill() }
            try await mock.waitForOutput(containing: "mock-appstore ready")
            let url = try MockAppStoreProcess.url(mock)
            let environment = try MockAppStoreProcess.reconcilerEnvironment(credentials: credentials).merging([
                "DATABASE_URL": db.url, "LOG_LEVEL": "warning",
            ]) { $1 }
            try await body(HistoryMock(db: db, url: url, environment: environment, credentials: credentials))
        }
    }

    /// Runs `reconciler` against the mock and the database; `extra` is added to its environment.
    package func reconciler(_ arguments: [String], environment extra: [String: String] = [:]) async throws -> ProcessResult {
        try await runProcess("reconciler", arguments, environment: environment.merging(extra) { $1 })
    }

    /// Every notification of the scenario, as the mock lists them.
    package func notifications() async throws -> [MockAppStore.NotificationLine] {
        try await MockAppStoreProcess.notifications(url)
    }

    /// The environment of a `reconciler` configured only by the mock's `reconciler.yaml` (every app
    /// and environment it serves), with the test's database.
    package var configurationFileEnvironment: [String: String] {
        ["RECONCILER_CONFIG": "\(credentials)/reconciler.yaml", "DATABASE_URL": db.url, "LOG_LEVEL": "warning"]
    }

    /// The requests the mock answered (or refused), by endpoint.
    package func requests() async throws -> [String: Int] {
        try await HTTP.request(.GET, "\(url)/mock/stats").json["requests"] as? [String: Int] ?? [:]
    }

    /// Get Notification History requests the mock answered, by the filter they carried (`*`: none).
    package func historyRequestsByFilter() async throws -> [String: Int] {
        let statistics = try await HTTP.request(.GET, "\(url)/mock/stats").json
        return statistics["historyRequestsByFilter"] as? [String: Int] ?? [:]
    }
}
