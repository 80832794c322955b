/// The reason for a refunded transaction.
///
/// Values Apple adds later decode without error and keep their raw value.
public struct RevocationReason: AppleEnumeration {
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }

    public static let refundedForOtherReason = RevocationReason(rawValue: 0)
    public static let refundedDueToIssue = RevocationReason(rawValue: 1)

    public static let knownValues: [RevocationReason] = [.refundedForOtherReason, .refundedDueToIssue]
}
