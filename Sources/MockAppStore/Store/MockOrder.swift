/// One transaction of an order, as `GET /mock/orders` and `mock-appstore --print-orders` list it,
/// so a demo or a test can pick an order ID for Look Up Order ID.
///
/// ```json
/// {"account":"account-3","bundleId":"com.example.reconciler.mock","environment":"Production","orderId":"MQ5Q7X2ZYB",...}
/// ```
package struct MockOrder: Codable, Hashable, Sendable {
    /// The ID on the customer's receipt email.
    package var orderId: String
    package var transactionId: String
    package var originalTransactionId: String
    /// The simulated customer's App Store account (`account-N`, numbered within its app and environment).
    package var account: String
    /// The app the order belongs to (always set in the mock's output).
    package var bundleId: String?
    /// `Production` or `Sandbox` (always set in the mock's output).
    package var environment: String?
    package var productId: String?
    /// The purchase date, UNIX milliseconds.
    package var purchaseDate: Int64?
    /// The app's user ID for this customer, when the purchase carries one.
    package var appAccountToken: String?
    /// `mock-appstore --forged`: Look Up Order ID answers this order with a transaction signed by a
    /// stranger's CA, which a reconciler must reject.
    package var forged: Bool?
}
