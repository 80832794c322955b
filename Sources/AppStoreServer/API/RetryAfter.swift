public import Foundation

/// The instant a 429's `Retry-After` header names, whichever of its three forms it came in:
///
/// - UNIX time in milliseconds, as Apple documents it: `Retry-After: 1718031234567`;
/// - delta-seconds (RFC 9110 §10.2.3), as some proxies in front of a client send it: `Retry-After: 120`;
/// - an HTTP-date in IMF-fixdate form (RFC 9110 §5.6.7): `Retry-After: Sun, 06 Nov 1994 08:49:37 GMT`.
///
/// A plain integer below ``deltaSecondsLimit`` is delta-seconds, counted from `now` (when the
/// response arrived); a larger one is UNIX milliseconds. Anything else (a signed or fractional
/// number, the obsolete RFC 850 and asctime date forms, garbage) is not understood: the caller
/// backs off as if the header were absent.
///
/// ```swift
/// let now = Date()
/// RetryAfter(headerValue: "1718031234567", now: now)?.unixMilliseconds   // 1718031234567
/// RetryAfter(headerValue: "120", now: now)?.delay(from: now)              // 120 seconds
/// RetryAfter(headerValue: "soon", now: now)                               // nil
/// ```
public struct RetryAfter: Sendable, Hashable, CustomStringConvertible {
    public enum Form: String, Sendable, Hashable {
        case unixMilliseconds, deltaSeconds, httpDate
    }

    /// Integers below this are delta-seconds, others UNIX milliseconds. 10¹⁰ seconds are 317 years
    /// (no server asks for that), and 10¹⁰ ms after the epoch is April 1970 (no server means that).
    public static let deltaSecondsLimit: Int64 = 10_000_000_000

    /// The instant named, UNIX milliseconds.
    public var unixMilliseconds: Int64
    /// The form the header used.
    public var form: Form

    public init(unixMilliseconds: Int64, form: Form) {
        self.unixMilliseconds = unixMilliseconds
        self.form = form
    }

    /// Parses a header value; `nil` when it is none of the three forms.
    /// - Parameter now: when the response arrived, the origin of delta-seconds.
    public init?(headerValue: String, now: Date = Date()) {
        let value = headerValue.trimmingCharacters(in: .whitespaces)
        if !value.isEmpty, value.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) {
            guard let number = Int64(value) else { return nil }  // more digits than any real instant
            if number < Self.deltaSecondsLimit {
                self.init(unixMilliseconds: Self.milliseconds(of: now) + number * 1000, form: .deltaSeconds)
            } else {
                self.init(unixMilliseconds: number, form: .unixMilliseconds)
            }
            return
        }
        guard let date = Self.imfFixdate(value) else { return nil }
        self.init(unixMilliseconds: Self.milliseconds(of: date), form: .httpDate)
    }

    /// How long from `now` until the instant; zero when it has passed.
    public func delay(from now: Date = Date()) -> Duration {
        .milliseconds(max(0, unixMilliseconds - Self.milliseconds(of: now)))
    }

    public var description: String {
        "\(Date(timeIntervalSince1970: Double(unixMilliseconds) / 1000).formatted(.iso8601)) (\(form.rawValue))"
    }

    static func milliseconds(of date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded(.down)) }

    /// The wall-clock time `delay` after `date`, UNIX milliseconds.
    static func milliseconds(of date: Date, plus delay: Duration) -> Int64 {
        milliseconds(of: date) + delay.components.seconds * 1000 + delay.components.attoseconds / 1_000_000_000_000_000
    }

    private static let weekdays = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// `Sun, 06 Nov 1994 08:49:37 GMT`, exactly: fixed widths, English names, always GMT.
    private static func imfFixdate(_ value: String) -> Date? {
        let parts = value.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 6, parts[0].count == 4, parts[0].hasSuffix(","), weekdays.contains(String(parts[0].dropLast())),
            let day = number(parts[1], digits: 2), let month = months.firstIndex(of: String(parts[2])).map({ $0 + 1 }),
            let year = number(parts[3], digits: 4), parts[5] == "GMT"
        else { return nil }
        let clock = parts[4].split(separator: ":", omittingEmptySubsequences: false)
        guard clock.count == 3, let hour = number(clock[0], digits: 2), let minute = number(clock[1], digits: 2),
            let second = number(clock[2], digits: 2), hour <= 23, minute <= 59, second <= 60
        else { return nil }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "GMT")!
        // A leap second (60) is the instant after 59: never earlier than the server meant.
        let components = DateComponents(year: year, month: month, day: day, hour: hour, minute: minute, second: min(second, 59))
        // The calendar rolls 31 Feb over into March; such a date is not a date.
        guard let date = calendar.date(from: components), calendar.component(.day, from: date) == day,
            calendar.component(.month, from: date) == month
        else { return nil }
        return second == 60 ? date + 1 : date
    }

    /// A field of exactly `digits` ASCII digits.
    private static func number(_ text: Substring, digits: Int) -> Int? {
        guard text.utf8.count == digits, text.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else { return nil }
        return Int(text)
    }
}
