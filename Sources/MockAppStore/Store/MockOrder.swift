/// One transaction of an order, as `GET /mock/orders` and `mock-appstore --print-orders` list it,
/// so a demo or a test can pick an order ID for Look Up Order ID.
///
/// ```json
/// {"account":"account-3","bundleId":"com.example.reconciler.mock","environment":"Production","orderId":"MQ5Q7X2ZYB",...}
/// ```
public struct MockOrder: Codable, Hashable, Sendable {
    /// The ID on the customer's receipt email.
    public var orderId: String
    public var transactionId: String
    public var originalTransactionId: String
    /// The simulated customer's App Store account (`account-N`, numbered within its app and environment).
    public var account: String
    /// The app the order belongs to (always set in the mock's output).
    public var bundleId: String?
    /// `Production` or `Sandbox` (always set in the mock's output).
    public var environment: String?
    public var productId: String?
    /// The purchase date, UNIX milliseconds.
    public var purchaseDate: Int64?
    /// The app's user ID for this customer, when the purchase carries one.
    public var appAccountToken: String?
    /// `mock-appstore --forged`: Look Up Order ID answers this order with a transaction signed by a
    /// stranger's CA, which a reconciler must reject.
    public var forged: Bool?
}
