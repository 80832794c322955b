/// The type of the refund or revocation that applies to the transaction.
///
/// [revocationType](https://developer.apple.com/documentation/appstoreservernotifications/revocationtype)
///
/// Values Apple adds later decode without error and keep their raw value.
public struct RevocationType: AppleEnumeration {
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    /// The App Store refunded the whole transaction (`REFUND_FULL`).
    public static let refundFull = RevocationType(rawValue: "REFUND_FULL")
    /// The App Store refunded part of the transaction; see ``JWSTransactionDecodedPayload/revocationPercentage`` (`REFUND_PRORATED`).
    public static let refundProrated = RevocationType(rawValue: "REFUND_PRORATED")
    /// The purchase was revoked from a family member through Family Sharing (`FAMILY_REVOKE`).
    public static let familyRevoke = RevocationType(rawValue: "FAMILY_REVOKE")

    public static let knownValues: [RevocationType] = [.refundFull, .refundProrated, .familyRevoke]
}
