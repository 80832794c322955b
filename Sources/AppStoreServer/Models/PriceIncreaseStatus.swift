/// The status that indicates whether an auto-renewable subscription is subject to a price increase.
///
/// Values Apple adds later decode without error and keep their raw value, so code can log
/// and store them; compare against the static members for the known ones.
public struct PriceIncreaseStatus: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }

    public static let customerHasNotResponded = PriceIncreaseStatus(rawValue: 0)
    public static let customerConsentedOrWasNotifiedWithoutNeedingConsent = PriceIncreaseStatus(rawValue: 1)

    /// The values documented by Apple when this code was written.
    public static let knownValues: [PriceIncreaseStatus] = [.customerHasNotResponded, .customerConsentedOrWasNotifiedWithoutNeedingConsent]

    /// Whether Apple documented this value when this code was written.
    public var isKnown: Bool { Self.knownValues.contains(self) }

    public var description: String { String(rawValue) }
}
