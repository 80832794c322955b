/// The response of Look Up Order ID: [OrderLookupResponse](https://developer.apple.com/documentation/appstoreserverapi/orderlookupresponse).
///
/// Apple answers an unknown or foreign order ID with 200 and ``OrderLookupStatus/invalid``, not 404.
///
/// ```swift
/// let order = try await client.lookUpOrderId("MQ5Q7X2ZYB")
/// guard order.status == .valid else { return }
/// for signed in order.signedTransactions ?? [] { _ = try await verifier.verifyAndDecodeTransaction(signed) }
/// ```
public struct OrderLookupResponse: Codable, Hashable, Sendable {
    public var status: OrderLookupStatus?
    /// The order's signed transactions (JWS); verify each like any other signed transaction.
    public var signedTransactions: [String]?

    public init(status: OrderLookupStatus? = nil, signedTransactions: [String]? = nil) {
        self.status = status
        self.signedTransactions = signedTransactions
    }
}
