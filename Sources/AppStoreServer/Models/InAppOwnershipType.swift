/// The relationship of the user with the family-shared purchase to which they have access.
///
/// [inAppOwnershipType](https://developer.apple.com/documentation/appstoreserverapi/inappownershiptype)
///
/// Values Apple adds later decode without error and keep their raw value.
public struct InAppOwnershipType: AppleEnumeration {
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    /// The transaction belongs to a family member who benefits from the service through Family Sharing (`FAMILY_SHARED`).
    public static let familyShared = InAppOwnershipType(rawValue: "FAMILY_SHARED")
    /// The transaction belongs to the purchaser (`PURCHASED`).
    public static let purchased = InAppOwnershipType(rawValue: "PURCHASED")

    public static let knownValues: [InAppOwnershipType] = [.familyShared, .purchased]
}
