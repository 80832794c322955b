/// The type of the in-app purchase (the `type` field of a signed transaction).
///
/// Values Apple adds later decode without error and keep their raw value, so code can log
/// and store them; compare against the static members for the known ones.
public struct ProductType: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    public static let autoRenewableSubscription = ProductType(rawValue: "Auto-Renewable Subscription")
    public static let nonConsumable = ProductType(rawValue: "Non-Consumable")
    public static let consumable = ProductType(rawValue: "Consumable")
    public static let nonRenewingSubscription = ProductType(rawValue: "Non-Renewing Subscription")

    /// The values documented by Apple when this code was written.
    public static let knownValues: [ProductType] = [.autoRenewableSubscription, .nonConsumable, .consumable, .nonRenewingSubscription]

    /// Whether Apple documented this value when this code was written.
    public var isKnown: Bool { Self.knownValues.contains(self) }

    public var description: String { rawValue }
}
