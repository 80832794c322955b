/// The relationship of the user with the family-shared purchase to which they have access.
///
/// Values Apple adds later decode without error and keep their raw value, so code can log
/// and store them; compare against the static members for the known ones.
public struct InAppOwnershipType: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    public static let familyShared = InAppOwnershipType(rawValue: "FAMILY_SHARED")
    public static let purchased = InAppOwnershipType(rawValue: "PURCHASED")

    /// The values documented by Apple when this code was written.
    public static let knownValues: [InAppOwnershipType] = [.familyShared, .purchased]

    /// Whether Apple documented this value when this code was written.
    public var isKnown: Bool { Self.knownValues.contains(self) }

    public var description: String { rawValue }
}
