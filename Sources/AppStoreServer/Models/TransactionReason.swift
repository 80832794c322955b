/// The cause of a purchase transaction, which indicates whether it's a customer's purchase or a renewal for an auto-renewable subscription that the system initiates.
///
/// Values Apple adds later decode without error and keep their raw value, so code can log
/// and store them; compare against the static members for the known ones.
public struct TransactionReason: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    public static let purchase = TransactionReason(rawValue: "PURCHASE")
    public static let renewal = TransactionReason(rawValue: "RENEWAL")

    /// The values documented by Apple when this code was written.
    public static let knownValues: [TransactionReason] = [.purchase, .renewal]

    /// Whether Apple documented this value when this code was written.
    public var isKnown: Bool { Self.knownValues.contains(self) }

    public var description: String { rawValue }
}
