public import Foundation

/// An instant as Apple's API and the database hold it: whole milliseconds since 1970-01-01 UTC.
///
/// Operators type it as strict ISO 8601 with a zone (`2026-11-20T03:10:00Z`, with or without
/// fractional seconds, `Z` or an offset such as `+01:00`), as UNIX milliseconds (`1763608200000`),
/// as `now`, or as `now-6h` style offsets (``parse(_:now:)``); it prints as ISO 8601 in UTC. It
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

    /// A time as operators type it, `now` being `now`; `nil` when the text is not one
    /// (``parse(_:now:)`` says why).
    package init?(parsing text: String, now: Timestamp = .now) {
        guard let time = try? Self.parse(text, now: now) else { return nil }
        self = time
    }

    /// The forms a time is typed in, for the messages that refuse another.
    package static let acceptedForms =
        "ISO 8601 with zero-padded fields and a zone (2026-11-20T03:10:00Z, 2026-11-20T04:10:00.250+01:00), "
        + "UNIX milliseconds (1763608200000), or now-<number><unit> (now-6h, now-30m, now-2d; units ms, s, m, h, d, w)"

    /// Why a text is not a time: the text, what is wrong with it, then the forms a time is typed in.
    package struct ParsingError: Error, Sendable, CustomStringConvertible {
        package var text: String
        /// What is wrong with it, e.g. `the day must have two digits (02, not 2)`.
        package var problem: String
        package var description: String { "\(text.isEmpty ? "an empty time" : text): \(problem); give \(Timestamp.acceptedForms)" }
    }

    /// A time as operators type it: strict ISO 8601 (every field zero-padded, seconds, optional
    /// fractional seconds, and a zone: `Z` or `±hh:mm`), UNIX milliseconds (at least 10^11: a
    /// smaller number is seconds typed by mistake), `now`, or `now-<number><unit>` (`now+` too)
    /// with a unit as `Duration(parsing:)` reads it. Anything else is refused rather than guessed:
    /// a lenient reader took `2026-11-2T…` for 2 November and `now-6` for six milliseconds ago.
    package static func parse(_ text: String, now: Timestamp = .now) throws(ParsingError) -> Timestamp {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        func refuse(_ problem: String) -> ParsingError { ParsingError(text: trimmed, problem: problem) }
        if trimmed == "now" { return now }
        if trimmed.hasPrefix("now-") || trimmed.hasPrefix("now+") {
            let length = String(trimmed.dropFirst(4))
            guard let offset = Duration(parsing: length) else {
                if !length.isEmpty, length.allSatisfy(\.isASCIIDigit) { throw refuse("the offset has no unit (\(trimmed)h? \(trimmed)m?)") }
                throw refuse("\(length.isEmpty ? "the offset is missing" : "\(length) is not a length (a number and a unit: 90s, 45m, 6h, 3d)")")
            }
            let (milliseconds, overflow) =
                trimmed.hasPrefix("now-")
                ? now.millisecondsSince1970.subtractingReportingOverflow(offset.milliseconds)
                : now.millisecondsSince1970.addingReportingOverflow(offset.milliseconds)
            // Beyond what a date can be: not a time (a trap otherwise).
            guard !overflow, abs(milliseconds) < farthest else { throw refuse("beyond any date") }
            return Timestamp(millisecondsSince1970: milliseconds)
        }
        if !trimmed.isEmpty, trimmed.allSatisfy(\.isASCIIDigit) {
            guard let value = Int64(trimmed), value < farthest else { throw refuse("beyond any date") }
            // A number that small is surely seconds typed by mistake; refuse rather than guess.
            guard value >= 100_000_000_000 else {
                throw refuse("UNIX milliseconds are at least 10^11 (1973); in seconds? then \(trimmed)000")
            }
            return Timestamp(millisecondsSince1970: value)
        }
        do {
            return try ISO8601Text.timestamp(trimmed)
        } catch {
            throw refuse(error.reason)
        }
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

    /// A format style is a value, safe to share between threads (a shared formatter object is not).
    private static let iso8601 = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
    /// Milliseconds from 1970 to about the year 10000 either way: further is no time anyone means.
    static let farthest: Int64 = 253_402_300_800_000
}
