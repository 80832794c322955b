import Foundation
import MockAppStore

/// What the tests read from a `mock-appstore` process: its own list of notifications
/// (``Rehearsal`` and ``HistoryMock`` share it).
///
/// ```swift
/// let undelivered = try await MockAppStoreProcess.notifications(url).filter { !$0.delivered }
/// ```
enum MockAppStoreProcess {
    /// Every notification of every app and environment, as `GET /mock/notifications` lists them
    /// (in Get Notification History's order).
    static func notifications(_ url: String) async throws -> [MockAppStore.NotificationLine] {
        let body = try await HTTP.request(.GET, "\(url)/mock/notifications").body
        return try String(decoding: body, as: UTF8.self).split(separator: "\n").map {
            try JSONDecoder().decode(MockAppStore.NotificationLine.self, from: Data($0.utf8))
        }
    }
}

extension MockAppStore.NotificationLine {
    /// The filter of a typed Get Notification History query that selects it: `TYPE`, or `TYPE/SUBTYPE`.
    var kind: String { subtype.map { "\(notificationType)/\($0)" } ?? notificationType }
}
