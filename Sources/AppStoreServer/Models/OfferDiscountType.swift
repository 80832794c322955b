/// The payment mode for a discount offer on an In-App Purchase.
///
/// Values Apple adds later decode without error and keep their raw value, so code can log
/// and store them; compare against the static members for the known ones.
public struct OfferDiscountType: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    public static let freeTrial = OfferDiscountType(rawValue: "FREE_TRIAL")
    public static let payAsYouGo = OfferDiscountType(rawValue: "PAY_AS_YOU_GO")
    public static let payUpFront = OfferDiscountType(rawValue: "PAY_UP_FRONT")
    public static let oneTime = OfferDiscountType(rawValue: "ONE_TIME")

    /// The values documented by Apple when this code was written.
    public static let knownValues: [OfferDiscountType] = [.freeTrial, .payAsYouGo, .payUpFront, .oneTime]

    /// Whether Apple documented this value when this code was written.
    public var isKnown: Bool { Self.knownValues.contains(self) }

    public var description: String { rawValue }
}
