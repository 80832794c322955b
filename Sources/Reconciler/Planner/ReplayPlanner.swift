import AppStoreServer

/// Turns an outage window into Get Notification History queries.
///
/// Urgent type/subtype pairs come first, in a configurable order starting with renewals and
/// expiries, so the entitlements that matter most are fixed first; then one unfiltered sweep of
/// the window catches everything else, including types this code does not know. Because a type
/// without a subtype returns only notifications without one, no typed query is complete on its
/// own: the sweep is what guarantees nothing is missed, and the handler's dedup makes the
/// repeats cheap.
///
/// Each query starts with few time shards (one per `shardDuration`, a day by default), so a
/// query with little in it costs about one request. A shard whose pages show it is dense is split
/// while it is paged: the rest of its time range is cut into pieces for idle workers
/// (``pieces(of:from:count:)``), so a large query still uses all the concurrency there is. Every
/// shard reaches 1 ms beyond its bounds on both sides, so a notification on a boundary is found
/// whichever way Apple treats the ends of a range (inclusive or exclusive is not documented).
///
/// ```swift
/// let shards = ReplayPlanner().plan(windowStart: start, windowEnd: end)
/// ```
public struct ReplayPlanner: Sendable {
    public struct Configuration: Sendable, Codable, Hashable {
        /// The typed queries, most urgent first; the sweep always follows them.
        public var priority: [NotificationFilter]
        /// The length of a query's first time shards, ms; dense ones split further as they are paged.
        public var shardDuration: Int64
        /// The most shards one query is split into.
        public var maximumShardsPerQuery: Int

        public init(
            priority: [NotificationFilter] = ReplayPlanner.defaultPriority, shardDuration: Int64 = 24 * 3_600_000,
            maximumShardsPerQuery: Int = 48
        ) {
            self.priority = priority
            self.shardDuration = shardDuration
            self.maximumShardsPerQuery = maximumShardsPerQuery
        }
    }

    /// Renewals and expiries first, then refunds, revokes and billing problems.
    public static let defaultPriority: [NotificationFilter] = [
        .init(.didRenew), .init(.didRenew, .billingRecovery),
        .init(.expired, .voluntary), .init(.expired, .billingRetry), .init(.expired, .priceIncrease),
        .init(.expired, .productNotForSale), .init(.expired),
        .init(.refund), .init(.revoke), .init(.gracePeriodExpired),
        .init(.didFailToRenew), .init(.didFailToRenew, .gracePeriod),
    ]

    /// One query over one time shard.
    public struct Shard: Sendable, Hashable, Codable {
        /// The query's position in the plan; the sweep is last.
        public var queryIndex: Int
        public var filter: NotificationFilter
        public var start: Int64
        public var end: Int64

        /// The request for this shard: the same body on every page.
        public var request: NotificationHistoryRequest {
            NotificationHistoryRequest(
                startDate: start, endDate: end, notificationType: filter.notificationType,
                notificationSubtype: filter.notificationSubtype)
        }
    }

    public let configuration: Configuration

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// The shards of every query, in priority order.
    public func plan(windowStart: Int64, windowEnd: Int64) -> [Shard] {
        var filters: [NotificationFilter] = []
        for filter in configuration.priority where !filters.contains(filter) && filter != .everything {
            filters.append(filter)
        }
        filters.append(.everything)
        let length = max(windowEnd - windowStart, 1)
        let count = Int(
            min(
                max((length + configuration.shardDuration - 1) / max(configuration.shardDuration, 1), 1),
                Int64(max(configuration.maximumShardsPerQuery, 1))))
        let boundaries = (0...count).map { windowStart + length * Int64($0) / Int64(count) }
        var shards: [Shard] = []
        for (queryIndex, filter) in filters.enumerated() {
            for index in 0..<count {
                shards.append(Shard(queryIndex: queryIndex, filter: filter, start: boundaries[index] - 1, end: boundaries[index + 1] + 1))
            }
        }
        return shards
    }

    /// The rest of a shard's time range, from `cursor` (the newest notification of its last page)
    /// to its end, cut into `count` pieces of the same query; each overlaps its neighbours by
    /// 1 ms, so nothing on a cut is lost.
    public func pieces(of shard: Shard, from cursor: Int64, count: Int) -> [Shard] {
        let start = max(cursor, shard.start + 1), end = shard.end - 1
        guard count >= 2, end - start >= Int64(count) else { return [] }
        let boundaries = (0...count).map { start + (end - start) * Int64($0) / Int64(count) }
        return (0..<count).map { Shard(queryIndex: shard.queryIndex, filter: shard.filter, start: boundaries[$0] - 1, end: boundaries[$0 + 1] + 1) }
    }
}
