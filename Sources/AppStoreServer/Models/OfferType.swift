/// The type of subscription offer.
///
/// Values Apple adds later decode without error and keep their raw value.
public struct OfferType: AppleEnumeration {
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }

    public static let introductoryOffer = OfferType(rawValue: 1)
    public static let promotionalOffer = OfferType(rawValue: 2)
    public static let offerCode = OfferType(rawValue: 3)
    public static let winBackOffer = OfferType(rawValue: 4)

    public static let knownValues: [OfferType] = [.introductoryOffer, .promotionalOffer, .offerCode, .winBackOffer]
}
