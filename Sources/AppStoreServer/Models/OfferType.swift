/// The type of subscription offer.
///
/// Values Apple adds later decode without error and keep their raw value, so code can log
/// and store them; compare against the static members for the known ones.
public struct OfferType: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }

    public static let introductoryOffer = OfferType(rawValue: 1)
    public static let promotionalOffer = OfferType(rawValue: 2)
    public static let offerCode = OfferType(rawValue: 3)
    public static let winBackOffer = OfferType(rawValue: 4)

    /// The values documented by Apple when this code was written.
    public static let knownValues: [OfferType] = [.introductoryOffer, .promotionalOffer, .offerCode, .winBackOffer]

    /// Whether Apple documented this value when this code was written.
    public var isKnown: Bool { Self.knownValues.contains(self) }

    public var description: String { String(rawValue) }
}
