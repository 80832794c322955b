import Foundation

extension Duration {
    /// A duration as operators type it: `250ms`, `90s`, `45m`, `6h`, `1.5h`, `3d`, `1w`, or plain
    /// milliseconds; `nil` when the text is not one (or is negative).
    ///
    /// ```swift
    /// Duration(parsing: "90s")         // .seconds(90)
    /// Duration.hours(6).operatorText   // "6h"
    /// ```
    package init?(parsing text: String) {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if trimmed.hasSuffix("ms"), let value = Double(trimmed.dropLast(2)), let milliseconds = Self.wholeMilliseconds(value) {
            self = .milliseconds(milliseconds)
            return
        }
        guard let unit = trimmed.last else { return nil }
        let multipliers: [Character: Double] = ["s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000]
        if let multiplier = multipliers[unit], let value = Double(trimmed.dropLast()), let milliseconds = Self.wholeMilliseconds(value * multiplier) {
            self = .milliseconds(milliseconds)
            return
        }
        guard trimmed.allSatisfy(\.isNumber), let milliseconds = Int64(trimmed) else { return nil }
        self = .milliseconds(milliseconds)
    }

    /// `value` milliseconds, rounded down, when it is a length a duration can hold (not negative,
    /// not infinite, not NaN, under about 290,000 years); `nil` otherwise, so `infh` or `1e300d` is
    /// not a duration rather than a trap.
    private static func wholeMilliseconds(_ value: Double) -> Int64? {
        guard value >= 0, value < 9e15 else { return nil }
        return Int64(value.rounded(.down))
    }

    /// Whole milliseconds (what PostgreSQL intervals, Apple's dates and the command line's durations are given in).
    package var milliseconds: Int64 { components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000 }

    /// As ``init(parsing:)`` reads it, in the largest unit that divides it (30d, 8h, 90s, 250ms).
    package var operatorText: String {
        let milliseconds = self.milliseconds
        for (unit, size) in [("d", Int64(86_400_000)), ("h", 3_600_000), ("m", 60_000), ("s", 1000)]
        where milliseconds > 0 && milliseconds % size == 0 {
            return "\(milliseconds / size)\(unit)"
        }
        return "\(milliseconds)ms"
    }

    /// Whole days, rounded down.
    package var days: Int64 { milliseconds / 86_400_000 }

    package static func days(_ days: Int64) -> Duration { .seconds(days * 86_400) }
    package static func hours(_ hours: Int64) -> Duration { .seconds(hours * 3600) }
    package static func minutes(_ minutes: Int64) -> Duration { .seconds(minutes * 60) }
}
