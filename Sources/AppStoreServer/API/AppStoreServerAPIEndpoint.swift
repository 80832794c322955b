/// The App Store Server API endpoints this client calls, each with Apple's documented rate limit.
public struct AppStoreServerAPIEndpoint: Hashable, Sendable, CustomStringConvertible {
    public let name: String
    /// Apple's production limit in requests per second, per app (the sandbox allows 10% of it).
    public let appleProductionLimitPerSecond: Double

    public static let getNotificationHistory = Self(name: "Get Notification History", appleProductionLimitPerSecond: 50)
    public static let getTransactionHistory = Self(name: "Get Transaction History", appleProductionLimitPerSecond: 50)
    public static let getAllSubscriptionStatuses = Self(name: "Get All Subscription Statuses", appleProductionLimitPerSecond: 50)
    public static let lookUpOrderId = Self(name: "Look Up Order ID", appleProductionLimitPerSecond: 10)
    public static let requestTestNotification = Self(name: "Request a Test Notification", appleProductionLimitPerSecond: 1)
    public static let getTestNotificationStatus = Self(name: "Get Test Notification Status", appleProductionLimitPerSecond: 1)
    public static let sendConsumptionInformation = Self(name: "Send Consumption Information", appleProductionLimitPerSecond: 50)
    public static let setAppAccountToken = Self(name: "Set App Account Token", appleProductionLimitPerSecond: 20)

    public static let all: [Self] = [
        .getNotificationHistory, .getTransactionHistory, .getAllSubscriptionStatuses, .lookUpOrderId,
        .requestTestNotification, .getTestNotificationStatus, .sendConsumptionInformation,
        .setAppAccountToken,
    ]

    public var description: String { name }
}
