/// The server environment, either sandbox or production.
///
/// Values Apple adds later decode without error and keep their raw value.
public struct AppStoreEnvironment: AppleEnumeration {
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    public static let sandbox = AppStoreEnvironment(rawValue: "Sandbox")
    public static let production = AppStoreEnvironment(rawValue: "Production")
    public static let xcode = AppStoreEnvironment(rawValue: "Xcode")
    public static let localTesting = AppStoreEnvironment(rawValue: "LocalTesting")

    public static let knownValues: [AppStoreEnvironment] = [.sandbox, .production, .xcode, .localTesting]
}
