public import Foundation

/// A window of time: from `start`, inclusive, to `end`, exclusive.
///
/// ```swift
/// let window = TimeWindow(start: .now - .hours(6), end: .now)
/// let shards = ReplayPlanner().plan(window)
/// ```
package struct TimeWindow: Hashable, Sendable, Codable, CustomStringConvertible {
    package var start: Timestamp
    package var end: Timestamp

    package init(start: Timestamp, end: Timestamp) {
        self.start = start
        self.end = end
    }

    /// From `range.lowerBound` to `range.upperBound`, UNIX milliseconds.
    package init(milliseconds range: Range<Int64>) {
        self.init(start: Timestamp(millisecondsSince1970: range.lowerBound), end: Timestamp(millisecondsSince1970: range.upperBound))
    }

    /// How long the window lasts (zero when it is empty or reversed).
    package var duration: Duration { max(.zero, end - start) }

    package func contains(_ time: Timestamp) -> Bool { start <= time && time < end }

    /// For a person: `2026-11-20T03:10:00.000Z → 2026-11-20T05:45:00.000Z (2h 35m)`.
    package var readableText: String { "\(start) → \(end) (\(duration.readableText))" }

    /// ISO 8601, `start/end`.
    package var description: String { "\(start)/\(end)" }
}
