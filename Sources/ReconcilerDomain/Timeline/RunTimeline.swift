import AppStoreServer
import Foundation

/// A run over time, for the incident report page (``IncidentReportPage``): the notifications it
/// recorded, by type, on the outage window's time axis (their `signedDate`) and on the run's clock
/// (when each was applied), and its App Store Server API requests per endpoint against the budget.
///
/// ```swift
/// let timeline = try await ledger.timeline(run: record)
/// let html = IncidentReportPage(report: report, timeline: timeline).render()
/// ```
///
/// Everything is aggregated into buckets by PostgreSQL (``RunLedger/timeline(run:until:)``), so its
/// size depends on the number of buckets and types, never on the number of notifications.
package struct RunTimeline: Sendable, Codable, Hashable {
    /// A time axis cut into equal buckets; times in UNIX milliseconds.
    package struct Axis: Sendable, Codable, Hashable {
        package var start: Int64
        package var end: Int64
        package var bucketMilliseconds: Int64

        package init(start: Int64, end: Int64, bucketMilliseconds: Int64) {
            self.start = start
            self.end = max(end, start + 1)
            self.bucketMilliseconds = max(bucketMilliseconds, 1)
        }

        /// Buckets from `start`, enough to reach `end`.
        package var bucketCount: Int { Int((end - start + bucketMilliseconds - 1) / bucketMilliseconds) }

        /// An axis over `start...end` of about `buckets` buckets of a round length (1 s, 5 min, 1 h, ...),
        /// starting at a multiple of that length; at least `minimumBucket` milliseconds each.
        package static func rounded(start: Int64, end: Int64, buckets: Int, minimumBucket: Int64 = 1) -> Axis {
            let wanted = max((end - start) / Int64(max(buckets, 1)), minimumBucket, 1)
            let length = roundLengths.first { $0 >= wanted } ?? (wanted + 86_400_000 - 1) / 86_400_000 * 86_400_000
            let first = Int64((Double(start) / Double(length)).rounded(.down)) * length
            return Axis(start: first, end: max(end, first + length), bucketMilliseconds: length)
        }

        package static let roundLengths: [Int64] = [
            1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000, 600_000, 900_000,
            1_800_000, 3_600_000, 7_200_000, 10_800_000, 21_600_000, 43_200_000, 86_400_000,
        ]
    }

    /// Notifications of one `TYPE` or `TYPE/SUBTYPE` in one bucket, by outcome.
    package struct NotificationBucket: Sendable, Codable, Hashable {
        package var typeAndSubtype: String
        /// Index of the bucket on its axis.
        package var bucket: Int
        package var applied: Int
        package var stale: Int
        package var recorded: Int

        package init(typeAndSubtype: String, bucket: Int, applied: Int, stale: Int, recorded: Int) {
            self.typeAndSubtype = typeAndSubtype
            self.bucket = bucket
            self.applied = applied
            self.stale = stale
            self.recorded = recorded
        }

        package var total: Int { applied + stale + recorded }
    }

    /// One endpoint's requests in one bucket of ``apiAxis``.
    package struct APIBucket: Sendable, Codable, Hashable {
        /// ``AppStoreServerAPIEndpoint/name``.
        package var endpoint: String
        /// Index of the bucket on ``apiAxis``.
        package var bucket: Int
        package var requests: Int
        /// The most requests in one second of the bucket (the bucket's requests when it is one second).
        package var busiestSecond: Int
        package var rateLimited: Int
        package var retries: Int

        package init(endpoint: String, bucket: Int, requests: Int, busiestSecond: Int, rateLimited: Int, retries: Int) {
            self.endpoint = endpoint
            self.bucket = bucket
            self.requests = requests
            self.busiestSecond = busiestSecond
            self.rateLimited = rateLimited
            self.retries = retries
        }
    }

    /// The window's axis (the window itself, widened to every `signedDate` found).
    package var signedAxis: Axis
    /// Recorded notifications by `signedDate`.
    package var bySignedDate: [NotificationBucket]
    /// The run's clock: from when it started to when it (or its last process) ended.
    package var runAxis: Axis
    /// Recorded notifications by when they were applied (`received_at`), on ``runAxis``.
    package var byAppliedTime: [NotificationBucket]
    /// API requests, on the run's clock in whole seconds.
    package var apiAxis: Axis
    package var api: [APIBucket]
    /// Requests per second per endpoint a process that worked on the run kept to (the highest when
    /// processes differed); keyed by endpoint name.
    package var apiBudgets: [String: Double]
    /// How many processes recorded API requests or budgets for the run.
    package var apiProcesses: Int

    package init(
        signedAxis: Axis, bySignedDate: [NotificationBucket], runAxis: Axis, byAppliedTime: [NotificationBucket], apiAxis: Axis,
        api: [APIBucket], apiBudgets: [String: Double], apiProcesses: Int
    ) {
        self.signedAxis = signedAxis
        self.bySignedDate = bySignedDate
        self.runAxis = runAxis
        self.byAppliedTime = byAppliedTime
        self.apiAxis = apiAxis
        self.api = api
        self.apiBudgets = apiBudgets
        self.apiProcesses = apiProcesses
    }

    /// Whether the page highlights a `TYPE` or `TYPE/SUBTYPE`: its type's rule says it is urgent
    /// (DID_RENEW and EXPIRED: a missed renewal or expiry is a customer with the wrong access).
    package static func isUrgent(_ typeAndSubtype: String) -> Bool {
        let type = typeAndSubtype.split(separator: "/", maxSplits: 1).first.map(String.init) ?? typeAndSubtype
        return NotificationRules.rule(for: NotificationTypeV2(rawValue: type)).isUrgent
    }
}
