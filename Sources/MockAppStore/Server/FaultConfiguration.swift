import AppStoreServer
import Foundation

/// Misbehaviour on demand. Fractions are per request to the App Store API endpoints (the
/// `/mock/...` endpoints are never sabotaged), spread evenly: a fraction of 0.2 sabotages every
/// fifth eligible request, so a test gets the faults it asks for. It can be changed while running
/// with `POST /mock/faults`.
package struct FaultConfiguration: Codable, Sendable, Hashable {
    /// Added to every response, ms.
    package var latencyMilliseconds: Int = 0
    /// A uniformly random extra delay up to this, ms.
    package var latencyJitterMilliseconds: Int = 0
    /// Answer 500 with GeneralInternalRetryableError.
    package var serverErrorRate: Double = 0
    /// Answer 429 with a `Retry-After` 200 to 1000 ms ahead, regardless of the rate limit.
    package var rateLimitedRate: Double = 0
    /// Injected 429s announce a `Retry-After` this many seconds ahead instead (0: 200 to 1000 ms),
    /// as Apple may when the hourly budget is spent.
    package var rateLimitedRetryAfterSeconds: Int = 0
    /// The form of every 429's `Retry-After`: Apple's UNIX milliseconds, or what a proxy may send.
    package var retryAfterFormat: RetryAfterFormat = .unixMilliseconds
    /// Close the connection without answering.
    package var dropRate: Double = 0
    /// Send only half of a successful body, then close.
    package var truncateRate: Double = 0
    /// Answer 4000017 PaginationTokenExpired to a request carrying a pagination token.
    package var expiredTokenRate: Double = 0
    /// Customers (any of their transaction ids) whose Get Transaction History and Get All
    /// Subscription Statuses keep failing with ``failingCustomersErrorCode``, as one broken account does.
    package var failingCustomers: [String] = []
    /// The error those requests get: 5000001 GeneralInternalRetryableError (500) by default, or
    /// 5000000 GeneralInternalError (500), 4040001 AccountNotFoundError (404) and so on.
    package var failingCustomersErrorCode: Int64 = 5_000_001
    /// The App Store API's reads lag the App Store's events by this many ms, as Apple's API may
    /// serve a refund seconds after the REFUND notification was sent: Get Transaction History
    /// serves a transaction modified (refunded, say) more recently as it was before, yet signed at
    /// request time; Get All Subscription Statuses serves each subscription's last transaction,
    /// status and renewal info as they were `now - lag`; Get Notification History lists a
    /// notification only from `lag` after it was first sent. The webhook's delivery does not lag.
    package var apiLagMilliseconds: Int64 = 0
    /// The `Date` header of every App Store API response is this many seconds ahead of the mock's
    /// clock (negative: behind), as a host whose clock is off sees Apple's.
    package var dateSkewSeconds: Int = 0
    /// Apps whose requests are answered 401 as if the key did not cover them: a bundle ID (every
    /// environment) or `BUNDLE_ID:production` / `BUNDLE_ID:sandbox` (one, as production answers
    /// 401 until an app's first release).
    package var unauthorizedApps: [String] = []

    package init() {}

    /// Whether ``unauthorizedApps`` refuses `bundleId` in `environment`.
    func refuses(_ bundleId: String, in environment: AppStoreEnvironment) -> Bool {
        unauthorizedApps.contains { entry in
            entry == bundleId || entry.lowercased() == "\(bundleId):\(environment.rawValue)".lowercased()
        }
    }

    /// The forms of `Retry-After` (RFC 9110 §10.2.3 and Apple's).
    package enum RetryAfterFormat: String, Codable, Sendable, Hashable, CaseIterable {
        /// Apple's: the UNIX time in milliseconds.
        case unixMilliseconds = "unix-ms"
        /// Seconds from the response, rounded up, as some proxies send it.
        case deltaSeconds = "delta-seconds"
        /// An IMF-fixdate such as `Sun, 06 Nov 1994 08:49:37 GMT`, rounded up to the second.
        case httpDate = "http-date"
    }

    enum CodingKeys: String, CodingKey {
        case latencyMilliseconds, latencyJitterMilliseconds, serverErrorRate, rateLimitedRate, rateLimitedRetryAfterSeconds, retryAfterFormat
        case dropRate, truncateRate, expiredTokenRate, failingCustomers, failingCustomersErrorCode, apiLagMilliseconds
        case dateSkewSeconds, unauthorizedApps
    }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        latencyMilliseconds = try container.decodeIfPresent(Int.self, forKey: .latencyMilliseconds) ?? 0
        latencyJitterMilliseconds = try container.decodeIfPresent(Int.self, forKey: .latencyJitterMilliseconds) ?? 0
        serverErrorRate = try container.decodeIfPresent(Double.self, forKey: .serverErrorRate) ?? 0
        rateLimitedRate = try container.decodeIfPresent(Double.self, forKey: .rateLimitedRate) ?? 0
        rateLimitedRetryAfterSeconds = try container.decodeIfPresent(Int.self, forKey: .rateLimitedRetryAfterSeconds) ?? 0
        retryAfterFormat = try container.decodeIfPresent(RetryAfterFormat.self, forKey: .retryAfterFormat) ?? .unixMilliseconds
        dropRate = try container.decodeIfPresent(Double.self, forKey: .dropRate) ?? 0
        truncateRate = try container.decodeIfPresent(Double.self, forKey: .truncateRate) ?? 0
        expiredTokenRate = try container.decodeIfPresent(Double.self, forKey: .expiredTokenRate) ?? 0
        failingCustomers = try container.decodeIfPresent([String].self, forKey: .failingCustomers) ?? []
        failingCustomersErrorCode = try container.decodeIfPresent(Int64.self, forKey: .failingCustomersErrorCode) ?? 5_000_001
        apiLagMilliseconds = try container.decodeIfPresent(Int64.self, forKey: .apiLagMilliseconds) ?? 0
        dateSkewSeconds = try container.decodeIfPresent(Int.self, forKey: .dateSkewSeconds) ?? 0
        unauthorizedApps = try container.decodeIfPresent([String].self, forKey: .unauthorizedApps) ?? []
    }
}

extension FaultConfiguration.RetryAfterFormat {
    /// The `Retry-After` value for `instant` (UNIX ms) in this form, sent at `now`, and the
    /// instant it announces: the whole-second forms round up, so never earlier than `instant`.
    func header(for instant: Int64, now: Int64) -> (value: String, announced: Int64) {
        switch self {
        case .unixMilliseconds:
            return (String(instant), instant)
        case .deltaSeconds:
            let seconds = max(0, (instant - now + 999) / 1000)
            return (String(seconds), now + seconds * 1000)
        case .httpDate:
            let seconds = (instant + 999) / 1000
            return (Self.imfFixdate(unixSeconds: seconds), seconds * 1000)
        }
    }

    /// `Sun, 06 Nov 1994 08:49:37 GMT`.
    static func imfFixdate(unixSeconds: Int64) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "GMT")!
        let date = Date(timeIntervalSince1970: Double(unixSeconds))
        let parts = calendar.dateComponents([.weekday, .day, .month, .year, .hour, .minute, .second], from: date)
        let weekdays = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ value: Int?) -> String { String(format: "%02d", value ?? 0) }
        let weekday = weekdays[(parts.weekday ?? 1) - 1], month = months[(parts.month ?? 1) - 1], year = String(format: "%04d", parts.year ?? 1970)
        return "\(weekday), \(two(parts.day)) \(month) \(year) \(two(parts.hour)):\(two(parts.minute)):\(two(parts.second)) GMT"
    }
}
