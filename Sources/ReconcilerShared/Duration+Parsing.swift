import Foundation

extension Duration {
    /// A duration as operators type it, a number and its unit: `250ms`, `90s`, `45m`, `6h`, `1.5h`,
    /// `3d`, `1w`; `nil` when the text is not one. A number without a unit is refused, not read
    /// as milliseconds: `now-6` or `--overlap 3600` meant something else.
    ///
    /// ```swift
    /// Duration(parsing: "90s")         // .seconds(90)
    /// Duration.hours(6).operatorText   // "6h"
    /// ```
    package init?(parsing text: String) {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        let unitStart = trimmed.firstIndex { !$0.isASCIIDigit && $0 != "." } ?? trimmed.endIndex
        let (number, unit) = (trimmed[..<unitStart], trimmed[unitStart...])
        let multipliers: [Substring: Double] = ["ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000]
        // Digits with at most one point between them: no sign, exponent, hex or `inf` for Double to read.
        guard let multiplier = multipliers[unit], number.first?.isASCIIDigit == true, number.last?.isASCIIDigit == true,
            number.filter({ $0 == "." }).count <= 1, let value = Double(number),
            let milliseconds = Self.wholeMilliseconds(value * multiplier)
        else { return nil }
        self = .milliseconds(milliseconds)
    }

    /// `value` milliseconds, rounded down, when it is a length a duration can hold (under about
    /// 290,000 years); `nil` otherwise, so `99999999999999999999w` is not a duration rather than a trap.
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

    /// For a person, rounded to what matters at its size: `0.006s`, `45s`, `5m 30s`, `6h`,
    /// `2h 35m`, `26d 3h 10m` (a window's length; ``operatorText`` is exact).
    package var readableText: String {
        let milliseconds = max(self.milliseconds, 0)
        if milliseconds < 60_000 {
            let seconds = milliseconds % 1000 == 0 ? "\(milliseconds / 1000)" : String(format: "%.3f", Double(milliseconds) / 1000)
            return (seconds.contains(".") ? String(seconds.reversed().drop { $0 == "0" }.reversed()) : seconds) + "s"
        }
        let step: Int64 = milliseconds < 3_600_000 ? 1000 : 60_000
        var left = (milliseconds + step / 2) / step * step
        var parts: [String] = []
        for (unit, size) in [("d", Int64(86_400_000)), ("h", 3_600_000), ("m", 60_000), ("s", 1000)] where left >= size {
            parts.append("\(left / size)\(unit)")
            left %= size
        }
        return parts.joined(separator: " ")
    }

    /// Whole days, rounded down.
    package var days: Int64 { milliseconds / 86_400_000 }

    package static func days(_ days: Int64) -> Duration { .seconds(days * 86_400) }
    package static func hours(_ hours: Int64) -> Duration { .seconds(hours * 3600) }
    package static func minutes(_ minutes: Int64) -> Duration { .seconds(minutes * 60) }
}

extension Character {
    /// `0` to `9` only (`isNumber` is true of other scripts' digits and of fractions too).
    var isASCIIDigit: Bool { ("0"..."9").contains(self) }
}
