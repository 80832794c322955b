/// The reason an auto-renewable subscription expired.
///
/// Values Apple adds later decode without error and keep their raw value, so code can log
/// and store them; compare against the static members for the known ones.
public struct ExpirationIntent: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }

    public static let customerCancelled = ExpirationIntent(rawValue: 1)
    public static let billingError = ExpirationIntent(rawValue: 2)
    public static let customerDidNotConsentToPriceIncrease = ExpirationIntent(rawValue: 3)
    public static let productNotAvailable = ExpirationIntent(rawValue: 4)
    public static let other = ExpirationIntent(rawValue: 5)

    /// The values documented by Apple when this code was written.
    public static let knownValues: [ExpirationIntent] = [.customerCancelled, .billingError, .customerDidNotConsentToPriceIncrease, .productNotAvailable, .other]

    /// Whether Apple documented this value when this code was written.
    public var isKnown: Bool { Self.knownValues.contains(self) }

    public var description: String { String(rawValue) }
}
