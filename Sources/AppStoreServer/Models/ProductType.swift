/// The type of in-app purchase products you can offer in your app.
///
/// [type](https://developer.apple.com/documentation/appstoreserverapi/type)
///
/// It is the `type` field of a signed transaction.
/// Values Apple adds later decode without error and keep their raw value.
public struct ProductType: AppleEnumeration {
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    /// An auto-renewable subscription (`Auto-Renewable Subscription`).
    public static let autoRenewableSubscription = ProductType(rawValue: "Auto-Renewable Subscription")
    /// A non-consumable in-app purchase (`Non-Consumable`).
    public static let nonConsumable = ProductType(rawValue: "Non-Consumable")
    /// A consumable in-app purchase (`Consumable`).
    public static let consumable = ProductType(rawValue: "Consumable")
    /// A non-renewing subscription (`Non-Renewing Subscription`).
    public static let nonRenewingSubscription = ProductType(rawValue: "Non-Renewing Subscription")

    public static let knownValues: [ProductType] = [.autoRenewableSubscription, .nonConsumable, .consumable, .nonRenewingSubscription]
}
