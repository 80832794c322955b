import Foundation
import Synchronization

/// Counters of what the client did, for reports and metrics: totals (``snapshot``) and, per
/// endpoint and wall-clock second, requests, 429s and retries (``timeline``), for charts.
///
/// ```swift
/// let atStart = client.statistics.timeline
/// // ... work ...
/// let share = client.statistics.timeline.since(atStart)   // what this piece of work did, second by second
/// ```
///
/// The timeline's memory is bounded: one small counter set per endpoint per second with traffic,
/// for the last ``secondsKept`` seconds.
public final class APIStatistics: Sendable {
    public struct Snapshot: Sendable, Codable, Hashable {
        /// Requests sent, including retries.
        public var requests: Int
        /// Requests that were repeats of a failed one.
        public var retries: Int
        /// 429 responses received.
        public var rateLimited: Int
        /// 5xx responses received.
        public var serverErrors: Int
        /// Connection failures, timeouts and truncated bodies.
        public var transportErrors: Int
        /// Calls that failed for good.
        public var failedCalls: Int

        public init(requests: Int, retries: Int, rateLimited: Int, serverErrors: Int, transportErrors: Int, failedCalls: Int) {
            self.requests = requests
            self.retries = retries
            self.rateLimited = rateLimited
            self.serverErrors = serverErrors
            self.transportErrors = transportErrors
            self.failedCalls = failedCalls
        }

        /// The sum of two snapshots (for a run resumed by several processes).
        public static func + (lhs: Snapshot, rhs: Snapshot) -> Snapshot {
            Snapshot(
                requests: lhs.requests + rhs.requests, retries: lhs.retries + rhs.retries, rateLimited: lhs.rateLimited + rhs.rateLimited,
                serverErrors: lhs.serverErrors + rhs.serverErrors, transportErrors: lhs.transportErrors + rhs.transportErrors,
                failedCalls: lhs.failedCalls + rhs.failedCalls)
        }

        public static let zero = Snapshot(requests: 0, retries: 0, rateLimited: 0, serverErrors: 0, transportErrors: 0, failedCalls: 0)
    }

    private let requests = Atomic<Int>(0)
    private let retries = Atomic<Int>(0)
    private let rateLimited = Atomic<Int>(0)
    private let serverErrors = Atomic<Int>(0)
    private let transportErrors = Atomic<Int>(0)
    private let failedCalls = Atomic<Int>(0)

    /// What one endpoint did in one wall-clock second.
    public struct SecondCounts: Sendable, Codable, Hashable {
        /// Requests sent, including retries.
        public var requests: Int
        /// 429 responses received.
        public var rateLimited: Int
        /// Requests that were repeats of a failed one.
        public var retries: Int

        public init(requests: Int = 0, rateLimited: Int = 0, retries: Int = 0) {
            self.requests = requests
            self.rateLimited = rateLimited
            self.retries = retries
        }

        var isEmpty: Bool { requests == 0 && rateLimited == 0 && retries == 0 }
    }

    /// Requests, 429s and retries per endpoint per wall-clock second; seconds without traffic are absent.
    public struct Timeline: Sendable, Codable, Hashable {
        public struct Entry: Sendable, Codable, Hashable {
            /// ``AppStoreServerAPIEndpoint/name``.
            public var endpoint: String
            /// UNIX seconds.
            public var second: Int64
            public var counts: SecondCounts

            public init(endpoint: String, second: Int64, counts: SecondCounts) {
                self.endpoint = endpoint
                self.second = second
                self.counts = counts
            }
        }

        /// Sorted by endpoint, then second.
        public var entries: [Entry]

        public init(entries: [Entry] = []) {
            self.entries = entries.sorted { ($0.endpoint, $0.second) < ($1.endpoint, $1.second) }
        }

        /// What was counted after `earlier` (a timeline of the same statistics taken before): one
        /// piece of work's share of a process's counters.
        public func since(_ earlier: Timeline) -> Timeline {
            var before: [String: [Int64: SecondCounts]] = [:]
            for entry in earlier.entries { before[entry.endpoint, default: [:]][entry.second] = entry.counts }
            return Timeline(
                entries: entries.compactMap { entry in
                    guard let old = before[entry.endpoint]?[entry.second] else { return entry }
                    let counts = SecondCounts(
                        requests: entry.counts.requests - old.requests, rateLimited: entry.counts.rateLimited - old.rateLimited,
                        retries: entry.counts.retries - old.retries)
                    return counts.isEmpty ? nil : Entry(endpoint: entry.endpoint, second: entry.second, counts: counts)
                })
        }

        /// The sums over every second.
        public var totals: SecondCounts {
            entries.reduce(into: SecondCounts()) {
                $0.requests += $1.counts.requests
                $0.rateLimited += $1.counts.rateLimited
                $0.retries += $1.counts.retries
            }
        }
    }

    /// How many seconds of the timeline are kept per endpoint (the newest); a day by default.
    public let secondsKept: Int64

    /// One endpoint's seconds.
    private struct Seconds {
        var counts: [Int64: SecondCounts] = [:]
        var newest: Int64 = .min

        /// Counts the event in its second; beyond `kept` seconds the oldest tenth is dropped at
        /// once, so trimming happens once per `kept / 10` new seconds rather than on every one.
        mutating func add(_ event: Event, second: Int64, kept: Int64) {
            var entry = counts[second] ?? SecondCounts()
            switch event {
            case .request: entry.requests += 1
            case .retry: entry.retries += 1
            case .rateLimited: entry.rateLimited += 1
            default: return
            }
            counts[second] = entry
            newest = max(newest, second)
            if counts.count > kept {
                let oldestKept = newest - max(kept * 9 / 10, 1)
                counts = counts.filter { $0.key > oldestKept }
            }
        }
    }

    private let seconds = Mutex<[String: Seconds]>([:])

    public init(secondsKept: Int64 = 86_400) {
        self.secondsKept = max(secondsKept, 1)
    }

    /// Requests, 429s and retries per endpoint per second, as counted so far.
    public var timeline: Timeline {
        seconds.withLock { byEndpoint in
            Timeline(
                entries: byEndpoint.flatMap { endpoint, seconds in
                    seconds.counts.map { Timeline.Entry(endpoint: endpoint, second: $0.key, counts: $0.value) }
                })
        }
    }

    enum Event { case request, retry, rateLimited, serverError, transportError, failedCall }

    /// Counts an event; requests, retries and 429s also in `endpoint`'s second of `date`.
    func record(_ event: Event, endpoint: AppStoreServerAPIEndpoint? = nil, at date: Date = Date()) {
        if let endpoint, event == .request || event == .retry || event == .rateLimited {
            let second = Int64((date.timeIntervalSince1970).rounded(.down))
            let kept = secondsKept
            seconds.withLock { byEndpoint in
                byEndpoint[endpoint.name, default: Seconds()].add(event, second: second, kept: kept)
            }
        }
        switch event {
        case .request: requests.add(1, ordering: .relaxed)
        case .retry: retries.add(1, ordering: .relaxed)
        case .rateLimited: rateLimited.add(1, ordering: .relaxed)
        case .serverError: serverErrors.add(1, ordering: .relaxed)
        case .transportError: transportErrors.add(1, ordering: .relaxed)
        case .failedCall: failedCalls.add(1, ordering: .relaxed)
        }
    }

    public var snapshot: Snapshot {
        Snapshot(
            requests: requests.load(ordering: .relaxed), retries: retries.load(ordering: .relaxed),
            rateLimited: rateLimited.load(ordering: .relaxed), serverErrors: serverErrors.load(ordering: .relaxed),
            transportErrors: transportErrors.load(ordering: .relaxed), failedCalls: failedCalls.load(ordering: .relaxed))
    }
}
