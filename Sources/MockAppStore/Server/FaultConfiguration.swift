/// Misbehaviour on demand. Fractions are per request to the App Store API endpoints (the
/// `/mock/...` endpoints are never sabotaged), spread evenly: a fraction of 0.2 sabotages every
/// fifth eligible request, so a test gets the faults it asks for. It can be changed while running
/// with `POST /mock/faults`.
public struct FaultConfiguration: Codable, Sendable, Hashable {
    /// Added to every response, ms.
    public var latencyMilliseconds: Int = 0
    /// A uniformly random extra delay up to this, ms.
    public var latencyJitterMilliseconds: Int = 0
    /// Answer 500 with GeneralInternalRetryableError.
    public var serverErrorRate: Double = 0
    /// Answer 429 with a `Retry-After` 200 to 1000 ms ahead, regardless of the rate limit.
    public var rateLimitedRate: Double = 0
    /// Close the connection without answering.
    public var dropRate: Double = 0
    /// Send only half of a successful body, then close.
    public var truncateRate: Double = 0
    /// Answer 4000017 PaginationTokenExpired to a request carrying a pagination token.
    public var expiredTokenRate: Double = 0

    public init() {}

    enum CodingKeys: String, CodingKey {
        case latencyMilliseconds, latencyJitterMilliseconds, serverErrorRate, rateLimitedRate, dropRate, truncateRate, expiredTokenRate
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        latencyMilliseconds = try container.decodeIfPresent(Int.self, forKey: .latencyMilliseconds) ?? 0
        latencyJitterMilliseconds = try container.decodeIfPresent(Int.self, forKey: .latencyJitterMilliseconds) ?? 0
        serverErrorRate = try container.decodeIfPresent(Double.self, forKey: .serverErrorRate) ?? 0
        rateLimitedRate = try container.decodeIfPresent(Double.self, forKey: .rateLimitedRate) ?? 0
        dropRate = try container.decodeIfPresent(Double.self, forKey: .dropRate) ?? 0
        truncateRate = try container.decodeIfPresent(Double.self, forKey: .truncateRate) ?? 0
        expiredTokenRate = try container.decodeIfPresent(Double.self, forKey: .expiredTokenRate) ?? 0
    }
}
