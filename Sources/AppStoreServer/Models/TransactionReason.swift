/// The cause of a purchase transaction: a customer's purchase, or a renewal of an auto-renewable subscription that the system initiates.
///
/// [transactionReason](https://developer.apple.com/documentation/appstoreserverapi/transactionreason)
///
/// Values Apple adds later decode without error and keep their raw value.
public struct TransactionReason: AppleEnumeration {
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    /// The customer initiated the purchase (`PURCHASE`).
    public static let purchase = TransactionReason(rawValue: "PURCHASE")
    /// The system renewed an auto-renewable subscription (`RENEWAL`).
    public static let renewal = TransactionReason(rawValue: "RENEWAL")

    public static let knownValues: [TransactionReason] = [.purchase, .renewal]
}
