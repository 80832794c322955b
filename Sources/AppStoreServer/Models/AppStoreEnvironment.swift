/// The server environment, either sandbox or production.
///
/// [environment](https://developer.apple.com/documentation/appstoreserverapi/environment)
///
/// Values Apple adds later decode without error and keep their raw value.
public struct AppStoreEnvironment: AppleEnumeration {
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    /// The sandbox environment (`Sandbox`).
    public static let sandbox = AppStoreEnvironment(rawValue: "Sandbox")
    /// The production environment (`Production`).
    public static let production = AppStoreEnvironment(rawValue: "Production")
    /// StoreKit Testing in Xcode (`Xcode`); Apple's libraries define it, the App Store servers don't send it.
    public static let xcode = AppStoreEnvironment(rawValue: "Xcode")
    /// Local unit tests (`LocalTesting`); Apple's libraries define it for tests only.
    public static let localTesting = AppStoreEnvironment(rawValue: "LocalTesting")

    public static let knownValues: [AppStoreEnvironment] = [.sandbox, .production, .xcode, .localTesting]
}
