import Foundation

/// Parses the times and durations operators type: ISO 8601 (`2026-11-20T03:10:00Z`, with or
/// without fractional seconds or an offset; without an offset it is UTC; a plain date is its
/// midnight UTC), UNIX milliseconds (`1763608200000`), `now`, and `now-6h` style offsets.
/// Durations: `90s`, `45m`, `6h`, `7d`, or a bare number of milliseconds.
package enum TimeArgument {
    /// UNIX milliseconds, or `nil` when the text is not a time.
    package static func parse(_ text: String, now: Int64 = Int64(Date().timeIntervalSince1970 * 1000)) -> Int64? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if trimmed == "now" { return now }
        if trimmed.hasPrefix("now-") || trimmed.hasPrefix("now+") {
            guard let offset = duration(String(trimmed.dropFirst(4))) else { return nil }
            return trimmed.hasPrefix("now-") ? now - offset : now + offset
        }
        if !trimmed.isEmpty, trimmed.allSatisfy(\.isNumber) {
            // A number that small is surely seconds typed by mistake; refuse rather than guess.
            guard let value = Int64(trimmed), value >= 100_000_000_000 else { return nil }
            return value
        }
        for formatter in formatters {
            if let date = formatter.date(from: trimmed) {
                return Int64((date.timeIntervalSince1970 * 1000).rounded())
            }
        }
        for formatter in utcFormatters {
            if let date = formatter.date(from: trimmed) {
                return Int64((date.timeIntervalSince1970 * 1000).rounded())
            }
        }
        return nil
    }

    /// A duration in milliseconds (250ms, 90s, 45m, 6h, 3d, 1w, or plain milliseconds), or `nil`.
    package static func duration(_ text: String) -> Int64? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if trimmed.hasSuffix("ms"), let value = Double(trimmed.dropLast(2)), value >= 0 { return Int64(value) }
        guard let unit = trimmed.last else { return nil }
        let number = trimmed.dropLast()
        let multipliers: [Character: Int64] = ["s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000]
        if let multiplier = multipliers[unit], let value = Double(number), value >= 0 {
            return Int64(value * Double(multiplier))
        }
        if trimmed.allSatisfy(\.isNumber) { return Int64(trimmed) }
        return nil
    }

    /// A duration as ``duration(_:)`` reads it, in the largest unit that divides it (30d, 8h, 90s, 250ms).
    package static func formatDuration(_ milliseconds: Int64) -> String {
        for (unit, size) in [("d", Int64(86_400_000)), ("h", 3_600_000), ("m", 60_000), ("s", 1000)]
        where milliseconds > 0 && milliseconds % size == 0 {
            return "\(milliseconds / size)\(unit)"
        }
        return "\(milliseconds)ms"
    }

    /// ISO 8601 with milliseconds, in UTC.
    package static func iso8601(_ milliseconds: Int64) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: Date(timeIntervalSince1970: Double(milliseconds) / 1000))
    }

    nonisolated(unsafe) private static let formatters: [ISO8601DateFormatter] = {
        let withFraction = ISO8601DateFormatter()
        withFraction.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let plain = ISO8601DateFormatter()
        plain.formatOptions = [.withInternetDateTime]
        return [plain, withFraction]
    }()

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
