/// The type of subscription offer.
///
/// [offerType](https://developer.apple.com/documentation/appstoreserverapi/offertype)
///
/// Values Apple adds later decode without error and keep their raw value.
public struct OfferType: AppleEnumeration {
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// An introductory offer (`1`).
    public static let introductoryOffer = OfferType(rawValue: 1)
    /// A promotional offer (`2`).
    public static let promotionalOffer = OfferType(rawValue: 2)
    /// An offer with a subscription offer code (`3`).
    public static let offerCode = OfferType(rawValue: 3)
    /// A win-back offer (`4`).
    public static let winBackOffer = OfferType(rawValue: 4)

    public static let knownValues: [OfferType] = [.introductoryOffer, .promotionalOffer, .offerCode, .winBackOffer]
}
