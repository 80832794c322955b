public import Foundation

/// An instant as Apple's API and the database hold it: whole milliseconds since 1970-01-01 UTC.
///
/// Operators type it as ISO 8601 (`2026-11-20T03:10:00Z`, with or without fractional seconds or
/// an offset; without an offset it is UTC; a plain date is its midnight UTC), as UNIX milliseconds
/// (`1763608200000`), as `now`, or as `now-6h` style offsets; it prints as ISO 8601 in UTC. It
/// encodes as its milliseconds, the shape of every date in `export`, the feed and the reports.
///
/// ```swift
/// let start = Timestamp(parsing: "now-6h")!
/// let window = TimeWindow(start: start, end: .now)
/// print(start + .seconds(90))            // 2026-11-20T03:11:30.000Z
/// ```
package struct Timestamp: Hashable, Comparable, Sendable, Codable, CustomStringConvertible {
    package var millisecondsSince1970: Int64

    package init(millisecondsSince1970: Int64) {
        self.millisecondsSince1970 = millisecondsSince1970
    }

    package init(_ date: Date) {
        self.init(millisecondsSince1970: Int64((date.timeIntervalSince1970 * 1000).rounded()))
    }

    /// The current time of the system's wall clock.
    package static var now: Timestamp { Timestamp(Date()) }

    package var date: Date { Date(timeIntervalSince1970: Double(millisecondsSince1970) / 1000) }

    /// Seconds since 1970 (what Prometheus's timestamps are in).
    package var secondsSince1970: Double { Double(millisecondsSince1970) / 1000 }

    /// ISO 8601 with milliseconds, in UTC.
    package var description: String { date.formatted(Self.iso8601) }

    /// A time as operators type it, `now` being `now`; `nil` when the text is not a time.
    package init?(parsing text: String, now: Timestamp = .now) {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if trimmed == "now" {
            self = now
            return
        }
        if trimmed.hasPrefix("now-") || trimmed.hasPrefix("now+") {
            guard let offset = Duration(parsing: String(trimmed.dropFirst(4))) else { return nil }
            let (milliseconds, overflow) =
                trimmed.hasPrefix("now-")
                ? now.millisecondsSince1970.subtractingReportingOverflow(offset.milliseconds)
                : now.millisecondsSince1970.addingReportingOverflow(offset.milliseconds)
            // Beyond what a date can be: not a time (a trap otherwise).
            guard !overflow, abs(milliseconds) < Self.farthest else { return nil }
            self.init(millisecondsSince1970: milliseconds)
            return
        }
        if !trimmed.isEmpty, trimmed.allSatisfy(\.isNumber) {
            // A number that small is surely seconds typed by mistake; refuse rather than guess.
            guard let value = Int64(trimmed), value >= 100_000_000_000 else { return nil }
            self.init(millisecondsSince1970: value)
            return
        }
        for style in Self.iso8601Styles {
            if let date = try? style.parse(trimmed) {
                self.init(date)
                return
            }
        }
        for formatter in Self.utcFormatters {
            if let date = formatter.date(from: trimmed) {
                self.init(date)
                return
            }
        }
        return nil
    }

    package static func < (left: Timestamp, right: Timestamp) -> Bool { left.millisecondsSince1970 < right.millisecondsSince1970 }

    package static func + (time: Timestamp, duration: Duration) -> Timestamp {
        Timestamp(millisecondsSince1970: time.millisecondsSince1970 + duration.milliseconds)
    }

    package static func - (time: Timestamp, duration: Duration) -> Timestamp {
        Timestamp(millisecondsSince1970: time.millisecondsSince1970 - duration.milliseconds)
    }

    /// How long from `earlier` to `later` (negative when `later` comes first).
    package static func - (later: Timestamp, earlier: Timestamp) -> Duration {
        .milliseconds(later.millisecondsSince1970 - earlier.millisecondsSince1970)
    }

    package init(from decoder: any Decoder) throws {
        self.init(millisecondsSince1970: try decoder.singleValueContainer().decode(Int64.self))
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(millisecondsSince1970)
    }

    /// Format styles are values, safe to share between threads (a shared formatter object is not).
    private static let iso8601 = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
    private static let iso8601Styles = [Date.ISO8601FormatStyle(), iso8601]
    /// Milliseconds from 1970 to about the year 10000 either way: further is no time anyone means.
    private static let farthest: Int64 = 253_402_300_800_000

    private static let utcFormatters: [DateFormatter] = [
        "yyyy-MM-dd'T'HH:mm:ss.SSS", "yyyy-MM-dd'T'HH:mm:ss", "yyyy-MM-dd'T'HH:mm", "yyyy-MM-dd HH:mm:ss", "yyyy-MM-dd",
    ].map { format in
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = format
        return formatter
    }
}
