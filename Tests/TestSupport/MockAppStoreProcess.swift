import Foundation
package import MockAppStore
import NIOHTTP1

/// What the tests read from a `mock-appstore` process: its URL, the variables it writes for a
/// reconciler, and its own list of notifications (``Rehearsal`` and ``HistoryMock`` share these).
///
/// ```swift
/// let url = try MockAppStoreProcess.url(mock)
/// let environment = try MockAppStoreProcess.reconcilerEnvironment(credentials: directory)
/// let undelivered = try await MockAppStoreProcess.notifications(url).filter { !$0.delivered }
/// ```
package enum MockAppStoreProcess {
    /// The production base URL the mock printed (`mock-appstore listening on http://...`).
    package static func url(_ mock: RunningProcess) throws -> String {
        guard let line = mock.stdout.split(separator: "\n").first(where: { $0.hasPrefix("mock-appstore listening on ") }),
            let url = line.split(separator: " ").last
        else { throw ProcessFailure(description: "mock-appstore printed no URL: \(mock.stdout.suffix(2000))") }
        return String(url)
    }

    /// The `APP_STORE_*` variables of the mock's `reconciler.env` in `credentials`.
    package static func reconcilerEnvironment(credentials: String) throws -> [String: String] {
        var environment: [String: String] = [:]
        for line in try String(contentsOfFile: "\(credentials)/reconciler.env", encoding: .utf8).split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1)
            environment[String(parts[0])] = parts.count > 1 ? String(parts[1]) : ""
        }
        return environment
    }

    /// Every notification of every app and environment, as `GET /mock/notifications` lists them
    /// (in Get Notification History's order).
    package static func notifications(_ url: String) async throws -> [MockAppStore.NotificationLine] {
        let body = try await HTTP.request(.GET, "\(url)/mock/notifications").body
        return try String(decoding: body, as: UTF8.self).split(separator: "\n").map {
            try JSONDecoder().decode(MockAppStore.NotificationLine.self, from: Data($0.utf8))
        }
    }
}

extension MockAppStore.NotificationLine {
    /// The filter of a typed Get Notification History query that selects it: `TYPE`, or `TYPE/SUBTYPE`.
    package var kind: String { subtype.map { "\(notificationType)/\($0)" } ?? notificationType }
}
