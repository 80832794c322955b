import AppStoreServer
import Foundation
import Testing

/// `Retry-After` in Apple's form, a proxy's delta-seconds and an HTTP-date, and what is not one.
@Suite struct RetryAfterTests {
    /// 2023-11-14T22:13:20.250Z.
    let now = Date(timeIntervalSince1970: 1_700_000_000.25)
    let nowMilliseconds: Int64 = 1_700_000_000_250

    @Test func applesUNIXMillisecondsAreAnInstant() throws {
        let value = try #require(RetryAfter(headerValue: "1718031234567", now: now))
        #expect(value == RetryAfter(unixMilliseconds: 1_718_031_234_567, form: .unixMilliseconds))
        #expect(RetryAfter(headerValue: " 1700000001000 ", now: now)?.delay(from: now) == .milliseconds(750))
    }

    @Test func aSmallIntegerIsDeltaSecondsFromNow() throws {
        let value = try #require(RetryAfter(headerValue: "120", now: now))
        #expect(value == RetryAfter(unixMilliseconds: nowMilliseconds + 120_000, form: .deltaSeconds))
        #expect(value.delay(from: now) == .seconds(120))
        #expect(RetryAfter(headerValue: "0", now: now) == RetryAfter(unixMilliseconds: nowMilliseconds, form: .deltaSeconds))
    }

    @Test func theThresholdSeparatesTheTwoIntegerForms() {
        let below = String(RetryAfter.deltaSecondsLimit - 1), at = String(RetryAfter.deltaSecondsLimit)
        #expect(RetryAfter(headerValue: below, now: now)?.form == .deltaSeconds)
        #expect(RetryAfter(headerValue: at, now: now) == RetryAfter(unixMilliseconds: RetryAfter.deltaSecondsLimit, form: .unixMilliseconds))
    }

    @Test func anIMFFixdateIsAnInstant() {
        // RFC 9110's example: 784111777 seconds after the epoch.
        #expect(
            RetryAfter(headerValue: "Sun, 06 Nov 1994 08:49:37 GMT", now: now)
                == RetryAfter(unixMilliseconds: 784_111_777_000, form: .httpDate))
        #expect(RetryAfter(headerValue: "Tue, 14 Nov 2023 22:13:25 GMT", now: now)?.delay(from: now) == .milliseconds(4750))
        // A leap second is the instant after :59.
        #expect(RetryAfter(headerValue: "Sat, 31 Dec 2016 23:59:60 GMT", now: now)?.unixMilliseconds == 1_483_228_800_000)
    }

    @Test func anInstantThatHasPassedMeansNoWait() {
        #expect(RetryAfter(unixMilliseconds: nowMilliseconds - 5000, form: .unixMilliseconds).delay(from: now) == .zero)
    }

    @Test(arguments: [
        "", " ", "soon", "-5", "+5", "1.5", "5s", "1e3", "99999999999999999999999",
        "Sunday, 06-Nov-94 08:49:37 GMT",  // RFC 850, obsolete
        "Sun Nov  6 08:49:37 1994",  // asctime, obsolete
        "Sun, 06 Nov 1994 08:49:37 UTC",  // not GMT
        "Sun, 6 Nov 1994 08:49:37 GMT",  // one-digit day
        "Sun, 31 Feb 1994 08:49:37 GMT",  // no such day
        "Sun, 06 Nov 1994 24:00:00 GMT",
        "Sun, 06 Nov 1994 08:49:+7 GMT",
        "Sun, 06 Nov 1994 08:49:37 GMT extra",
    ])
    func anythingElseIsNotUnderstood(_ value: String) {
        #expect(RetryAfter(headerValue: value, now: now) == nil)
    }
}
