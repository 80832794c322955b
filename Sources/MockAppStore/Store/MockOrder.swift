/// One transaction of an order, as `GET /mock/orders` and `mock-appstore --print-orders` list it,
/// so a demo or a test can pick an order ID for Look Up Order ID.
///
/// ```json
/// {"account":"account-3","orderId":"MQ5Q7X2ZYB","originalTransactionId":"2000000100000012","transactionId":"2000000100000012",...}
/// ```
public struct MockOrder: Codable, Hashable, Sendable {
    /// The ID on the customer's receipt email.
    public var orderId: String
    public var transactionId: String
    public var originalTransactionId: String
    /// The simulated customer's App Store account (`account-N`).
    public var account: String
    public var productId: String?
    /// The purchase date, UNIX milliseconds.
    public var purchaseDate: Int64?
    /// The app's user ID for this customer, when the purchase carries one.
    public var appAccountToken: String?
    /// `mock-appstore --forged`: Look Up Order ID answers this order with a transaction signed by a
    /// stranger's CA, which a reconciler must reject.
    public var forged: Bool?
}
