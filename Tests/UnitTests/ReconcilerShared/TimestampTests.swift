import Foundation
import ReconcilerShared
import Testing

/// The times and durations operators type, read once into ``Timestamp`` and `Duration`.
@Suite struct TimestampTests {
    let now = Timestamp(millisecondsSince1970: 1_763_608_200_000)

    func time(_ text: String) -> Int64? { Timestamp(parsing: text, now: now)?.millisecondsSince1970 }

    /// Every form a time is typed in, and what each reads as.
    @Test func timesOperatorsType() {
        let accepted: [(String, Int64)] = [
            ("2025-11-20T03:10:00Z", 1_763_608_200_000),
            ("2025-11-20T03:10:00.250Z", 1_763_608_200_250),
            ("2025-11-20T03:10:00.2Z", 1_763_608_200_200),
            // Finer than a millisecond is dropped: Apple and the database hold milliseconds.
            ("2025-11-20T03:10:00.123456789Z", 1_763_608_200_123),
            ("2025-11-20T04:10:00+01:00", 1_763_608_200_000),
            ("2025-11-19T21:40:00-05:30", 1_763_608_200_000),
            ("2026-11-20T03:10:00+01:00", 1_795_140_600_000),
            ("2024-02-29T00:00:00Z", 1_709_164_800_000),
            ("1970-01-01T00:00:00Z", 0),
            ("1763608200000", 1_763_608_200_000),
            ("1700000000000", 1_700_000_000_000),
            ("100000000000", 100_000_000_000),
            (" now-6h ", now.millisecondsSince1970 - 6 * 3_600_000),
            ("now", now.millisecondsSince1970),
            ("now-6h", now.millisecondsSince1970 - 6 * 3_600_000),
            ("now-1.5h", now.millisecondsSince1970 - 90 * 60_000),
            ("now-250ms", now.millisecondsSince1970 - 250),
            ("now-2d", now.millisecondsSince1970 - 2 * 86_400_000),
            ("now+90s", now.millisecondsSince1970 + 90_000),
        ]
        for (text, milliseconds) in accepted {
            #expect(time(text) == milliseconds, "\(text)")
        }
    }

    /// What a lenient reader guessed at is refused, each with what is wrong and the accepted forms:
    /// `now-6` recovered a 0.2-second window, `2026-11-2T…` was read as 2 November.
    @Test func anythingElseIsRefusedWithWhatIsWrongAndTheAcceptedForms() {
        let refused: [(String, String)] = [
            ("now-6", "no unit"),
            ("now+6", "no unit"),
            ("2026-11-2T03:10:00Z", "the day must have two digits (02, not 2)"),
            ("2026-1-20T03:10:00Z", "the month must have two digits (01, not 1)"),
            ("2026-11-20T3:10:00Z", "the hour must have two digits"),
            ("2026-11-20T03:10:00", "no zone"),
            ("1700000000", "at least 10^11"),
            ("1763608200", "at least 10^11"),
            ("2025-11-20", "no time of day"),
            ("2026-11-20 03:10:00Z", "capital T"),
            ("2026-11-20t03:10:00Z", "capital T"),
            ("2026-11-20T03:10:00z", "the zone must be Z"),
            ("2026-11-20T03:10Z", "the seconds are missing"),
            ("2026-11-20T03:10:00+0100", "±hh:mm (01:00, not 0100)"),
            ("2026-11-20T03:10:00+1:00", "the zone's hours must have two digits"),
            ("2026-11-20T03:10:00+01", "±hh:mm"),
            ("2026-11-20T03:10:00.Z", "1 to 9 digits"),
            ("2026-11-20T03:10:00.1234567890Z", "1 to 9 digits"),
            ("2026-11-20T03:10:00Z junk", "after the zone"),
            ("2026-02-29T00:00:00Z", "no day 29"),
            ("2025-13-45T99:00:00Z", "13 is not a month"),
            ("2026-11-20T24:00:00Z", "24 is not a hour"),
            ("2026-11-20T03:60:00Z", "60 is not a minute"),
            ("2026-11-20T03:10:60Z", "60 is not a second"),
            ("20251120", "at least 10^11"),
            ("now-6x", "6x is not a length"),
            ("now-", "the offset is missing"),
            ("now--6h", "is not a length"),
            ("now-1e3s", "is not a length"),
            ("+1763608200000", "not a time"),
            ("1763608200000.5", "four digits"),
            ("", "not a time"),
            ("yesterday", "not a time"),
            ("tomorrow-ish", "not a time"),
        ]
        for (text, problem) in refused {
            #expect(time(text) == nil, "\(text)")
            #expect(throws: Timestamp.ParsingError.self, "\(text)") { try Timestamp.parse(text, now: now) }
            do {
                _ = try Timestamp.parse(text, now: now)
            } catch {
                #expect(error.problem.contains(problem), "\(text): \(error.problem)")
                #expect(error.description.contains(Timestamp.acceptedForms), "\(text)")
            }
        }
    }

    /// The reader agrees with Foundation's ISO 8601 formatter over four centuries of instants, in UTC
    /// and at an offset: its own calendar arithmetic (`days_from_civil`) is what this checks, in whole
    /// seconds (Foundation renders fractions through a `Double`).
    @Test func strictISO8601AgreesWithFoundationsFormatter() throws {
        var generator = SystemRandomNumberGenerator()
        let utc = Date.ISO8601FormatStyle()
        let zone = try #require(TimeZone(secondsFromGMT: -(5 * 3600 + 30 * 60)))
        let offset = Date.ISO8601FormatStyle(timeZoneSeparator: .colon, timeZone: zone)
        for _ in 0..<2000 {
            let seconds = Int64.random(in: -5_000_000_000...8_000_000_000, using: &generator)
            let date = Date(timeIntervalSince1970: Double(seconds))
            #expect(time(date.formatted(utc)) == seconds * 1000, "\(date.formatted(utc))")
            #expect(time(date.formatted(offset)) == seconds * 1000, "\(date.formatted(offset))")
        }
    }

    /// Values no clock or calendar holds are refused like any other bad input (they trapped the
    /// process: `Int64(Double.infinity)`, an offset beyond `Int64`).
    @Test func valuesBeyondAnyDateAreRefusedNotATrap() {
        for text in ["infh", "nanms", "1e300d", "99999999999999999999999w"] {
            #expect(Duration(parsing: text) == nil, "\(text)")
        }
        for text in ["now-infh", "now+1e300d", "now-100000000d", "now+100000000d"] {
            #expect(time(text) == nil, "\(text)")
        }
        #expect(time("now-3650d") == now.millisecondsSince1970 - 3650 * 86_400_000)
    }

    @Test func durations() {
        #expect(Duration(parsing: "90s") == .seconds(90))
        #expect(Duration(parsing: "1.5h") == .minutes(90))
        #expect(Duration(parsing: "7d") == .days(7))
        #expect(Duration(parsing: "250ms") == .milliseconds(250))
        #expect(Duration(parsing: " 90s ") == .seconds(90))
        #expect(Duration(parsing: "1w") == .days(7))
        // A number without a unit is not a duration (it was read as milliseconds), nor is anything
        // Double would read besides digits and one point.
        for text in ["250", "6", "", "soon", "-5m", "+5m", ".5h", "5.h", "1.2.3h", "1e3s", "0x10s", "nanh", "5 m", "5M", "5mins"] {
            #expect(Duration(parsing: text) == nil, "\(text)")
        }
        #expect(Duration.days(30).operatorText == "30d")
        #expect(Duration.minutes(90).operatorText == "90m")
        #expect(Duration.milliseconds(1500).operatorText == "1500ms")
    }

    /// A window's length as the run prints it before its first request: rounded to what matters.
    @Test func lengthsForAPerson() {
        let lengths: [(Duration, String)] = [
            (.milliseconds(6), "0.006s"), (.milliseconds(200), "0.2s"), (.seconds(45), "45s"), (.milliseconds(45_500), "45.5s"),
            (.seconds(330), "5m 30s"), (.hours(6) + .milliseconds(3), "6h"), (.minutes(155), "2h 35m"),
            (.days(26) + .minutes(190), "26d 3h 10m"), (.days(26) + .minutes(10), "26d 10m"), (.zero, "0s"),
        ]
        for (length, text) in lengths {
            #expect(length.readableText == text, "\(length)")
        }
        #expect(TimeWindow(start: now, end: now + .minutes(155)).readableText == "2025-11-20T03:10:00.000Z → 2025-11-20T05:45:00.000Z (2h 35m)")
    }

    /// A timestamp prints as ISO 8601 in UTC and encodes as its milliseconds, the shape of every
    /// date in the reports and `export`, so typing the fields changes no JSON.
    @Test func aTimestampPrintsAsISO8601AndEncodesAsMilliseconds() throws {
        #expect(now.description == "2025-11-20T03:10:00.000Z")
        #expect(String(decoding: try JSONEncoder().encode(["at": now]), as: UTF8.self) == #"{"at":1763608200000}"#)
        #expect(try JSONDecoder().decode(Timestamp.self, from: Data("1763608200250".utf8)) == now + .milliseconds(250))
        #expect((now + .hours(2)) - now == .hours(2))
    }

    @Test func aWindowHoldsItsStartAndNotItsEnd() {
        let window = TimeWindow(start: now, end: now + .hours(1))
        #expect(window.contains(now))
        #expect(!window.contains(now + .hours(1)))
        #expect(window.duration == .hours(1))
        #expect(TimeWindow(start: now, end: now - .hours(1)).duration == .zero)
        #expect(window.description == "2025-11-20T03:10:00.000Z/2025-11-20T04:10:00.000Z")
    }
}
