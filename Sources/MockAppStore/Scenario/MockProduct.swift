import AppStoreServer

/// The mock app's product catalog.
struct MockProduct: Sendable, Hashable {
    var productId: String
    var type: ProductType
    var subscriptionGroupIdentifier: String?
    /// Service level within the group: 1 is the highest (an upgrade moves to a lower number).
    var level: Int
    /// Period length in "monthly" periods (yearly: 12).
    var periods: Int64
    var price: Int64

    static let premiumMonthly = MockProduct(
        productId: "com.example.premium.monthly", type: .autoRenewableSubscription,
        subscriptionGroupIdentifier: "21000001", level: 1, periods: 1, price: 9990)
    static let basicMonthly = MockProduct(
        productId: "com.example.basic.monthly", type: .autoRenewableSubscription,
        subscriptionGroupIdentifier: "21000001", level: 2, periods: 1, price: 4990)
    static let premiumYearly = MockProduct(
        productId: "com.example.premium.yearly", type: .autoRenewableSubscription,
        subscriptionGroupIdentifier: "21000001", level: 1, periods: 12, price: 99990)
    static let coins = MockProduct(
        productId: "com.example.coins.100", type: .consumable, subscriptionGroupIdentifier: nil,
        level: 0, periods: 0, price: 990)
    static let lifetime = MockProduct(
        productId: "com.example.lifetime", type: .nonConsumable, subscriptionGroupIdentifier: nil,
        level: 0, periods: 0, price: 29990)
    /// A season pass: a non-renewing subscription lasting one "monthly" period. Apple sends no
    /// expiry for it; the app knows its term (the mock's `reconciler.env` says it).
    static let seasonPass = MockProduct(
        productId: "com.example.pass.season", type: .nonRenewingSubscription, subscriptionGroupIdentifier: nil,
        level: 0, periods: 1, price: 2990)

    /// The win-back offer lapsed subscribers are eligible for.
    static let winBackOfferId = "com.example.winback.premium"

    static func byId(_ productId: String?) -> MockProduct {
        [premiumMonthly, basicMonthly, premiumYearly, coins, lifetime, seasonPass].first { $0.productId == productId } ?? premiumMonthly
    }
}
