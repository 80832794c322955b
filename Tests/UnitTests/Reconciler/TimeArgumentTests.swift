import AppStoreServer
import ReconcilerShared
import Testing

@Suite struct TimeArgumentTests {
    let now: Int64 = 1_763_608_200_000

    @Test func timesOperatorsType() {
        #expect(TimeArgument.parse("2025-11-20T03:10:00Z", now: now) == 1_763_608_200_000)
        #expect(TimeArgument.parse("2025-11-20T03:10:00.250Z", now: now) == 1_763_608_200_250)
        #expect(TimeArgument.parse("2025-11-20T04:10:00+01:00", now: now) == 1_763_608_200_000)
        #expect(TimeArgument.parse("2025-11-20T03:10:00", now: now) == 1_763_608_200_000)
        #expect(TimeArgument.parse("2025-11-20", now: now) == 1_763_596_800_000)
        #expect(TimeArgument.parse("1763608200000", now: now) == 1_763_608_200_000)
        #expect(TimeArgument.parse("now", now: now) == now)
        #expect(TimeArgument.parse("now-6h", now: now) == now - 6 * 3_600_000)
        #expect(TimeArgument.parse("now+90s", now: now) == now + 90_000)
    }

    @Test func garbageIsNotATime() {
        for text in ["", "yesterday", "1763608200", "2025-13-45T99:00:00Z", "now-6x", "20251120"] {
            #expect(TimeArgument.parse(text, now: now) == nil, "\(text)")
        }
    }

    @Test func durations() {
        #expect(TimeArgument.duration("90s") == 90_000)
        #expect(TimeArgument.duration("1.5h") == 5_400_000)
        #expect(TimeArgument.duration("7d") == 604_800_000)
        #expect(TimeArgument.duration("250") == 250)
        #expect(TimeArgument.duration("250ms") == 250)
        #expect(TimeArgument.duration("soon") == nil)
    }
}
