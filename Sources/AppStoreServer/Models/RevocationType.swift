/// The type of the refund or revocation that applies to the transaction.
///
/// Values Apple adds later decode without error and keep their raw value.
public struct RevocationType: AppleEnumeration {
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    public static let refundFull = RevocationType(rawValue: "REFUND_FULL")
    public static let refundProrated = RevocationType(rawValue: "REFUND_PRORATED")
    public static let familyRevoke = RevocationType(rawValue: "FAMILY_REVOKE")

    public static let knownValues: [RevocationType] = [.refundFull, .refundProrated, .familyRevoke]
}
