/// The relationship of the user with the family-shared purchase to which they have access.
///
/// Values Apple adds later decode without error and keep their raw value.
public struct InAppOwnershipType: AppleEnumeration {
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    public static let familyShared = InAppOwnershipType(rawValue: "FAMILY_SHARED")
    public static let purchased = InAppOwnershipType(rawValue: "PURCHASED")

    public static let knownValues: [InAppOwnershipType] = [.familyShared, .purchased]
}
