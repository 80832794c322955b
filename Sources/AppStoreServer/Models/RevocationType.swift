/// The type of the refund or revocation that applies to the transaction.
///
/// Values Apple adds later decode without error and keep their raw value, so code can log
/// and store them; compare against the static members for the known ones.
public struct RevocationType: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    public static let refundFull = RevocationType(rawValue: "REFUND_FULL")
    public static let refundProrated = RevocationType(rawValue: "REFUND_PRORATED")
    public static let familyRevoke = RevocationType(rawValue: "FAMILY_REVOKE")

    /// The values documented by Apple when this code was written.
    public static let knownValues: [RevocationType] = [.refundFull, .refundProrated, .familyRevoke]

    /// Whether Apple documented this value when this code was written.
    public var isKnown: Bool { Self.knownValues.contains(self) }

    public var description: String { rawValue }
}
