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
        if trimmed.hasSuffix("ms"), let value = Double(trimmed.dropLast(2)), value >= 0 {
            self = .milliseconds(Int64(value))
            return
        }
        guard let unit = trimmed.last else { return nil }
        let multipliers: [Character: Double] = ["s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000]
        if let multiplier = multipliers[unit], let value = Double(trimmed.dropLast()), value >= 0 {
            self = .milliseconds(Int64(value * multiplier))
            return
        }
        guard trimmed.allSatisfy(\.isNumber), let milliseconds = Int64(trimmed) else { return nil }
        self = .milliseconds(milliseconds)
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
