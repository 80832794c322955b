/// A time in strict ISO 8601, as the command line takes it: `YYYY-MM-DDTHH:MM:SS`, every field
/// zero-padded, optional fractional seconds, then a zone, `Z` or `±hh:mm`. Each field is read on
/// its own, so a refusal names the one that is wrong (`2026-11-2T03:10:00Z`: the day).
///
/// ```swift
/// try ISO8601Text.timestamp("2026-11-20T04:10:00.250+01:00")   // 2026-11-20T03:10:00.250Z
/// ```
struct ISO8601Text {
    struct Refusal: Error {
        var reason: String
    }

    private let bytes: [UInt8]
    private var position = 0

    private init(_ text: String) { bytes = Array(text.utf8) }

    /// The instant `text` names, or why it is not one.
    static func timestamp(_ text: String) throws(Refusal) -> Timestamp {
        var reader = ISO8601Text(text)
        return try reader.read()
    }

    private mutating func read() throws(Refusal) -> Timestamp {
        guard bytes.first.map(Self.isDigit) == true else { throw Refusal(reason: "not a time") }
        let year = try field("year", digits: 4, example: "2026")
        try expect("-", after: "the year")
        let month = try field("month", digits: 2, in: 1...12)
        try expect("-", after: "the month")
        let day = try field("day", digits: 2, in: 1...31)
        guard day <= Self.days(inMonth: month, ofYear: year) else { throw Refusal(reason: "month \(month) of \(year) has no day \(day)") }
        if position == bytes.count { throw Refusal(reason: "no time of day and zone (\(Self.text(bytes))T00:00:00Z?)") }
        if bytes[position] == UInt8(ascii: " ") || bytes[position] == UInt8(ascii: "t") {
            throw Refusal(reason: "separate the date and the time with a capital T")
        }
        try expect("T", after: "the date")
        let hour = try field("hour", digits: 2, in: 0...23)
        try expect(":", after: "the hour")
        let minute = try field("minute", digits: 2, in: 0...59)
        guard position < bytes.count, bytes[position] == UInt8(ascii: ":") else {
            throw Refusal(reason: "the seconds are missing (\(Self.two(hour)):\(Self.two(minute)):00)")
        }
        position += 1
        let second = try field("second", digits: 2, in: 0...59)
        var milliseconds = 0
        if position < bytes.count, bytes[position] == UInt8(ascii: ".") {
            position += 1
            let digits = run()
            guard (1...9).contains(digits.count) else { throw Refusal(reason: "the fraction of a second must have 1 to 9 digits") }
            // Whole milliseconds, as Apple and the database hold times: what is finer is dropped.
            milliseconds = Int((digits + [UInt8](repeating: UInt8(ascii: "0"), count: 3)).prefix(3).reduce(0) { $0 * 10 + Int($1 - 48) })
        }
        let offsetSeconds = try zone()
        guard position == bytes.count else { throw Refusal(reason: "unexpected \(Self.text(bytes[position...])) after the zone") }
        let days = Self.daysSince1970(year: year, month: month, day: day)
        let seconds = Int64(days) * 86_400 + Int64(hour * 3600 + minute * 60 + second) - Int64(offsetSeconds)
        return Timestamp(millisecondsSince1970: seconds * 1000 + Int64(milliseconds))
    }

    /// `Z`, or `+hh:mm` / `-hh:mm`: the offset from UTC in seconds.
    private mutating func zone() throws(Refusal) -> Int {
        guard position < bytes.count else { throw Refusal(reason: "no zone: add Z (UTC) or an offset such as +01:00") }
        let sign = bytes[position]
        position += 1
        if sign == UInt8(ascii: "Z") { return 0 }
        guard sign == UInt8(ascii: "+") || sign == UInt8(ascii: "-") else {
            throw Refusal(reason: "the zone must be Z or an offset such as +01:00")
        }
        let digits = bytes[position...].prefix(while: Self.isDigit)
        if digits.count == 4 {
            throw Refusal(
                reason: "the zone's offset must be ±hh:mm (\(Self.text(digits.prefix(2))):\(Self.text(digits.suffix(2))), not \(Self.text(digits)))")
        }
        let hours = try field("zone's hours", digits: 2, in: 0...23)
        guard position < bytes.count, bytes[position] == UInt8(ascii: ":") else {
            throw Refusal(reason: "the zone's offset must be ±hh:mm, such as +01:00")
        }
        position += 1
        let minutes = try field("zone's minutes", digits: 2, in: 0...59)
        return (sign == UInt8(ascii: "-") ? -1 : 1) * (hours * 3600 + minutes * 60)
    }

    /// A field of exactly `digits` digits, within `range` when given.
    private mutating func field(_ name: String, digits: Int, in range: ClosedRange<Int>? = nil, example: String? = nil) throws(Refusal) -> Int {
        let read = run()
        let value = read.reduce(0) { $0 * 10 + Int($1 - 48) }
        guard read.count == digits else {
            let padded = String(repeating: "0", count: max(0, digits - read.count)) + Self.text(read[...])
            let hint = read.isEmpty ? example.map { " (\($0))" } ?? "" : read.count < digits ? " (\(padded), not \(Self.text(read[...])))" : ""
            throw Refusal(reason: "the \(name) must have \(digits == 4 ? "four" : "two") digits\(hint)")
        }
        if let range, !range.contains(value) {
            throw Refusal(reason: "\(Self.text(read[...])) is not a \(name) (\(range.lowerBound) to \(range.upperBound))")
        }
        return value
    }

    private mutating func expect(_ separator: Unicode.Scalar, after what: String) throws(Refusal) {
        guard position < bytes.count, bytes[position] == UInt8(ascii: separator) else {
            throw Refusal(reason: "\(separator) must follow \(what)")
        }
        position += 1
    }

    /// The digits from here on.
    private mutating func run() -> ArraySlice<UInt8> {
        let start = position
        while position < bytes.count, Self.isDigit(bytes[position]) { position += 1 }
        return bytes[start..<position]
    }

    private static func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }
    private static func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
    private static func text(_ bytes: some Sequence<UInt8>) -> String { String(decoding: Array(bytes), as: UTF8.self) }

    private static func days(inMonth month: Int, ofYear year: Int) -> Int {
        switch month {
        case 2: year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days from 1970-01-01 to the date in the proleptic Gregorian calendar (Howard Hinnant's
    /// `days_from_civil`).
    private static func daysSince1970(year: Int, month: Int, day: Int) -> Int {
        let year = month <= 2 ? year - 1 : year
        let era = (year >= 0 ? year : year - 399) / 400
        let yearOfEra = year - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
