public import Foundation

/// A window of time, in UNIX milliseconds (as Apple's API and the database hold instants): from
/// `start`, inclusive, to `end`, exclusive.
///
/// ```swift
/// let window = TimeWindow(start: TimeArgument.parse("now-6h")!, end: TimeArgument.parse("now")!)
/// let shards = ReplayPlanner().plan(window)
/// ```
package struct TimeWindow: Hashable, Sendable, Codable, CustomStringConvertible {
    package var start: Int64
    package var end: Int64

    package init(start: Int64, end: Int64) {
        self.start = start
        self.end = end
    }

    /// How long the window lasts, ms (0 when it is empty or reversed).
    package var milliseconds: Int64 { max(0, end - start) }
    package var startDate: Date { Date(timeIntervalSince1970: Double(start) / 1000) }
    package var endDate: Date { Date(timeIntervalSince1970: Double(end) / 1000) }

    /// ISO 8601, `start/end`.
    package var description: String { "\(TimeArgument.iso8601(start))/\(TimeArgument.iso8601(end))" }
}
