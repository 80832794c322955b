package import AppStoreServer
package import ReconcilerShared

/// Turns an outage window into Get Notification History queries.
///
/// Urgent type/subtype pairs come first, in a configurable order starting with renewals and
/// expiries, so the entitlements that matter most are fixed first; then one unfiltered sweep of
/// the window catches everything else, including types this code does not know. Because a type
/// without a subtype returns only notifications without one, no typed query is complete on its
/// own: the sweep is what guarantees nothing is missed, and the handler's dedup makes the
/// repeats cheap.
///
/// Each query starts as one shard over the whole window, so a query with nothing in it costs one
/// request whatever the window's length. A shard whose pages show it is dense is split while it
/// is paged: the rest of its time range is cut into pieces for idle workers
/// (``pieces(of:from:count:)``), so a large query still uses all the concurrency there is, and
/// requests follow the data rather than the calendar. Every shard reaches 1 ms beyond its bounds
/// on both sides, so a notification on a boundary is found whichever way Apple treats the ends of
/// a range (inclusive or exclusive is not documented). `shardDuration` (`--shard-duration`) still
/// cuts each query into shards of that length up front, for whoever wants it.
///
/// ```swift
/// let shards = ReplayPlanner().plan(TimeWindow(start: start, end: end))
/// ```
package struct ReplayPlanner: Sendable {
    package struct Configuration: Sendable, Codable, Hashable {
        /// The typed queries, most urgent first; the sweep always follows them.
        package var priority: [NotificationFilter]
        /// The length of a query's first time shards, ms (stored with a run's options, so kept in
        /// the unit Apple's request bodies use); `nil` (the default): one shard per query, over the
        /// whole window. Dense shards split further as they are paged.
        package var shardDuration: Int64?
        /// With `shardDuration`: the most first shards one query is cut into.
        package var maximumShardsPerQuery: Int

        package init(
            priority: [NotificationFilter] = ReplayPlanner.defaultPriority, shardDuration: Int64? = nil,
            maximumShardsPerQuery: Int = 48
        ) {
            self.priority = priority
            self.shardDuration = shardDuration
            self.maximumShardsPerQuery = maximumShardsPerQuery
        }
    }

    /// The typed queries of ``NotificationRules``, in its order: consumption requests first, then
    /// renewals and expiries, then refunds, revokes and billing problems.
    package static let defaultPriority: [NotificationFilter] = NotificationRules.defaultQueries.map { NotificationFilter($0, $1) }

    /// One query over one time shard.
    package struct Shard: Sendable, Hashable, Codable {
        /// The query's position in the plan; the sweep is last.
        package var queryIndex: Int
        package var filter: NotificationFilter
        /// The bounds as Apple's request body gives them, UNIX ms (the split arithmetic is in them too).
        package var start: Int64
        package var end: Int64

        /// The bounds as instants.
        package var window: TimeWindow {
            TimeWindow(start: Timestamp(millisecondsSince1970: start), end: Timestamp(millisecondsSince1970: end))
        }

        package init(queryIndex: Int, filter: NotificationFilter, start: Int64, end: Int64) {
            self.queryIndex = queryIndex
            self.filter = filter
            self.start = start
            self.end = end
        }

        /// The request for this shard: the same body on every page.
        package var request: NotificationHistoryRequest {
            NotificationHistoryRequest(
                startDate: start, endDate: end, notificationType: filter.notificationType,
                notificationSubtype: filter.notificationSubtype)
        }
    }

    /// How far before a split's cut its pieces start, ms.
    ///
    /// The cut is the newest `signedDate` a shard's pages showed. Apple documents neither whether a
    /// window selects on `signedDate` or on the first send attempt nor the order of the pages; the
    /// first attempt follows the signing by a few hundred milliseconds (up to 2 s in the mock). If
    /// Apple selects on one date and orders by the other, a notification signed just before the cut
    /// may still be to come, and a piece starting at the cut would miss it. Ten seconds is five
    /// times the longest delay the mock makes; a delay beyond it shows as pages out of `signedDate`
    /// order by more than the margin, which makes the shard unsplittable instead. The overlap is read
    /// twice and deduplicated: it costs a page per split only where more than two notifications are
    /// signed a second.
    package static let splitMargin: Int64 = 10_000

    package let configuration: Configuration

    package init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// The shards of every query, in priority order.
    package func plan(_ window: TimeWindow) -> [Shard] {
        let (windowStart, windowEnd) = (window.start.millisecondsSince1970, window.end.millisecondsSince1970)
        var filters: [NotificationFilter] = []
        for filter in configuration.priority where !filters.contains(filter) && filter != .everything {
            filters.append(filter)
        }
        filters.append(.everything)
        let length = max(windowEnd - windowStart, 1)
        let duration = max(configuration.shardDuration ?? length, 1)
        let count = Int(min(max((length + duration - 1) / duration, 1), Int64(max(configuration.maximumShardsPerQuery, 1))))
        let boundaries = (0...count).map { windowStart + length * Int64($0) / Int64(count) }
        var shards: [Shard] = []
        for (queryIndex, filter) in filters.enumerated() {
            for index in 0..<count {
                shards.append(Shard(queryIndex: queryIndex, filter: filter, start: boundaries[index] - 1, end: boundaries[index + 1] + 1))
            }
        }
        return shards
    }

    /// The rest of a shard's time range, from ``splitMargin`` before `cut` (the newest `signedDate`
    /// its pages showed) to its end, cut into `count` pieces of the same query; each overlaps its
    /// neighbours by 1 ms, so nothing on a cut is lost.
    package func pieces(of shard: Shard, from cut: Int64, count: Int) -> [Shard] {
        let start = max(cut - Self.splitMargin, shard.start + 1), end = shard.end - 1
        guard count >= 2, end - start >= Int64(count) else { return [] }
        let boundaries = (0...count).map { start + (end - start) * Int64($0) / Int64(count) }
        return (0..<count).map { Shard(queryIndex: shard.queryIndex, filter: shard.filter, start: boundaries[$0] - 1, end: boundaries[$0 + 1] + 1) }
    }
}
