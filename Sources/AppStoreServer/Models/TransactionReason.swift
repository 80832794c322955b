/// The cause of a purchase transaction, which indicates whether it's a customer's purchase or a renewal for an auto-renewable subscription that the system initiates.
///
/// Values Apple adds later decode without error and keep their raw value.
public struct TransactionReason: AppleEnumeration {
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    public static let purchase = TransactionReason(rawValue: "PURCHASE")
    public static let renewal = TransactionReason(rawValue: "RENEWAL")

    public static let knownValues: [TransactionReason] = [.purchase, .renewal]
}
