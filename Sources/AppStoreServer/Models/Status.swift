/// The status of an auto-renewable subscription.
///
/// Values Apple adds later decode without error and keep their raw value, so code can log
/// and store them; compare against the static members for the known ones.
public struct Status: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }

    public static let active = Status(rawValue: 1)
    public static let expired = Status(rawValue: 2)
    public static let billingRetry = Status(rawValue: 3)
    public static let billingGracePeriod = Status(rawValue: 4)
    public static let revoked = Status(rawValue: 5)

    /// The values documented by Apple when this code was written.
    public static let knownValues: [Status] = [.active, .expired, .billingRetry, .billingGracePeriod, .revoked]

    /// Whether Apple documented this value when this code was written.
    public var isKnown: Bool { Self.knownValues.contains(self) }

    public var description: String { String(rawValue) }
}
