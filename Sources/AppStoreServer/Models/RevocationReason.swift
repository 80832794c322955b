/// The reason for a refunded transaction.
///
/// [revocationReason](https://developer.apple.com/documentation/appstoreserverapi/revocationreason)
///
/// Values Apple adds later decode without error and keep their raw value.
public struct RevocationReason: AppleEnumeration {
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// The App Store refunded the transaction for another reason, such as an accidental purchase (`0`).
    public static let refundedForOtherReason = RevocationReason(rawValue: 0)
    /// The App Store refunded the transaction because of an actual or perceived issue in your app (`1`).
    public static let refundedDueToIssue = RevocationReason(rawValue: 1)

    public static let knownValues: [RevocationReason] = [.refundedForOtherReason, .refundedDueToIssue]
}
