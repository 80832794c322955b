/// The server environment, either sandbox or production.
///
/// Values Apple adds later decode without error and keep their raw value, so code can log
/// and store them; compare against the static members for the known ones.
public struct AppStoreEnvironment: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    public static let sandbox = AppStoreEnvironment(rawValue: "Sandbox")
    public static let production = AppStoreEnvironment(rawValue: "Production")
    public static let xcode = AppStoreEnvironment(rawValue: "Xcode")
    public static let localTesting = AppStoreEnvironment(rawValue: "LocalTesting")

    /// The values documented by Apple when this code was written.
    public static let knownValues: [AppStoreEnvironment] = [.sandbox, .production, .xcode, .localTesting]

    /// Whether Apple documented this value when this code was written.
    public var isKnown: Bool { Self.knownValues.contains(self) }

    public var description: String { rawValue }
}
