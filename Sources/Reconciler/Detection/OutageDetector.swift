package import AppStoreServer
import Foundation
package import ReconcilerShared

/// Finds webhook outages from the App Store's side: Get Notification History with
/// `onlyFailures`, grouped into windows of failed first attempts.
///
/// ```swift
/// let detection = try await OutageDetector(client: client).detect(in: TimeWindow(start: .now - .days(7), end: .now))
/// for window in detection.windows { print(window.window, window.notifications) }
/// ```
package struct OutageDetector: Sendable {
    package struct Window: Sendable, Codable, Hashable {
        /// The window to recover: the first failed first-attempt minus the margin.
        package var start: Timestamp
        /// The last failed first-attempt plus the margin.
        package var end: Timestamp
        /// Notifications that have not reached the webhook.
        package var notifications: Int
        /// Send attempts by `sendAttemptResult`.
        package var attemptsByResult: [String: Int]
        /// Notifications Apple will still retry (production retries five times over about 6.5 days).
        package var stillRetrying: Int
        package var firstFailure: Timestamp
        package var lastFailure: Timestamp

        package var window: TimeWindow { TimeWindow(start: start, end: end) }
    }

    package struct Detection: Sendable, Codable {
        package var since: Timestamp
        package var until: Timestamp
        package var environment: AppStoreEnvironment
        package var windows: [Window]
    }

    package let client: AppStoreServerAPIClient
    /// Failures closer than this belong to one window.
    package let mergeGap: Duration
    /// Added before and after each window, so the run's window surely contains every failure.
    package let margin: Duration

    package init(client: AppStoreServerAPIClient, mergeGap: Duration = .minutes(30), margin: Duration = .minutes(5)) {
        self.client = client
        self.mergeGap = mergeGap
        self.margin = margin
    }

    /// Apple's retry delays after each failed attempt, in production.
    static let retryDelays: [Duration] = [1, 12, 24, 48, 72].map { .hours($0) }

    /// The windows of failed deliveries whose first attempt falls in `span`.
    package func detect(in span: TimeWindow) async throws -> Detection {
        let failures = try await failedDeliveries(in: span)
        var windows = group(failures, until: span.end)
        // The run's retention check must hold: never start before the detection window.
        for index in windows.indices { windows[index].start = max(windows[index].start, span.start) }
        return Detection(since: span.start, until: span.end, environment: client.configuration.environment, windows: windows)
    }

    /// A notification that has not reached the webhook, with its send attempts, oldest first.
    struct Failure {
        var firstAttempt: Timestamp
        var attempts: [SendAttemptItem]
    }

    /// Every failed delivery in the span, from one `onlyFailures` query per day, paged concurrently.
    private func failedDeliveries(in span: TimeWindow) async throws -> [Failure] {
        let (since, until, day) = (span.start.millisecondsSince1970, span.end.millisecondsSince1970, Duration.days(1).milliseconds)
        return try await withThrowingTaskGroup(of: [Failure].self) { group in
            for start in stride(from: since, to: until, by: Int(day)) {
                group.addTask {
                    var found: [Failure] = []
                    let request = NotificationHistoryRequest(startDate: start, endDate: min(start + day, until), onlyFailures: true)
                    for try await page in client.notificationHistory(request) {
                        for item in page.items {
                            let attempts = (item.sendAttempts ?? []).sorted { ($0.attemptDate ?? 0) < ($1.attemptDate ?? 0) }
                            guard let first = attempts.first?.attemptDate else { continue }
                            found.append(Failure(firstAttempt: Timestamp(millisecondsSince1970: first), attempts: attempts))
                        }
                    }
                    return found
                }
            }
            var failures: [Failure] = []
            for try await found in group { failures += found }
            return failures.sorted { $0.firstAttempt < $1.firstAttempt }
        }
    }

    /// Failures closer than `mergeGap` form one window, widened by `margin` on both sides.
    private func group(_ failures: [Failure], until: Timestamp) -> [Window] {
        let production = client.configuration.environment == .production
        var windows: [Window] = []
        for failure in failures {
            // Apple retries only in production, five times; an attempt whose next retry is still ahead is "retrying".
            let retrying =
                production && failure.attempts.count <= Self.retryDelays.count
                && Timestamp(millisecondsSince1970: failure.attempts.last?.attemptDate ?? 0) + Self.retryDelays[max(failure.attempts.count - 1, 0)]
                    > until
            if windows.isEmpty || failure.firstAttempt - windows[windows.count - 1].lastFailure > mergeGap {
                windows.append(
                    Window(
                        start: failure.firstAttempt - margin, end: failure.firstAttempt, notifications: 0, attemptsByResult: [:],
                        stillRetrying: 0, firstFailure: failure.firstAttempt, lastFailure: failure.firstAttempt))
            }
            var window = windows[windows.count - 1]
            window.lastFailure = failure.firstAttempt
            window.end = failure.firstAttempt + margin
            window.notifications += 1
            if retrying { window.stillRetrying += 1 }
            for attempt in failure.attempts { window.attemptsByResult[attempt.sendAttemptResult?.rawValue ?? "UNKNOWN", default: 0] += 1 }
            windows[windows.count - 1] = window
        }
        return windows
    }
}
