import Foundation
import ReconcilerShared
import Testing

/// The times and durations operators type, read once into ``Timestamp`` and `Duration`.
@Suite struct TimestampTests {
    let now = Timestamp(millisecondsSince1970: 1_763_608_200_000)

    func time(_ text: String) -> Int64? { Timestamp(parsing: text, now: now)?.millisecondsSince1970 }

    @Test func timesOperatorsType() {
        #expect(time("2025-11-20T03:10:00Z") == 1_763_608_200_000)
        #expect(time("2025-11-20T03:10:00.250Z") == 1_763_608_200_250)
        #expect(time("2025-11-20T04:10:00+01:00") == 1_763_608_200_000)
        #expect(time("2025-11-20T03:10:00") == 1_763_608_200_000)
        #expect(time("2025-11-20") == 1_763_596_800_000)
        #expect(time("1763608200000") == 1_763_608_200_000)
        #expect(time("now") == now.millisecondsSince1970)
        #expect(time("now-6h") == now.millisecondsSince1970 - 6 * 3_600_000)
        #expect(time("now+90s") == now.millisecondsSince1970 + 90_000)
    }

    @Test func garbageIsNotATime() {
        for text in ["", "yesterday", "1763608200", "2025-13-45T99:00:00Z", "now-6x", "20251120"] {
            #expect(time(text) == nil, "\(text)")
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
        #expect(Duration(parsing: "250") == .milliseconds(250))
        #expect(Duration(parsing: "250ms") == .milliseconds(250))
        #expect(Duration(parsing: "soon") == nil)
        #expect(Duration(parsing: "-5m") == nil)
        #expect(Duration.days(30).operatorText == "30d")
        #expect(Duration.minutes(90).operatorText == "90m")
        #expect(Duration.milliseconds(1500).operatorText == "1500ms")
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
