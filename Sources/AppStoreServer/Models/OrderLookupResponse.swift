/// A response that includes the order lookup status and an array of signed transactions for the in-app purchases in the order.
///
/// [OrderLookupResponse](https://developer.apple.com/documentation/appstoreserverapi/orderlookupresponse)
///
/// It is the response of Look Up Order ID. Apple answers an unknown or foreign order ID with 200
/// and ``OrderLookupStatus/invalid``, not 404.
///
/// ```swift
/// let order = try await client.lookUpOrderId("MQ5Q7X2ZYB")
/// guard order.status == .valid else { return }
/// for signed in order.signedTransactions ?? [] { _ = try await verifier.verifyAndDecodeTransaction(signed) }
/// ```
public struct OrderLookupResponse: Codable, Hashable, Sendable {
    /// The status that indicates whether the order ID is valid.
    ///
    /// [OrderLookupStatus](https://developer.apple.com/documentation/appstoreserverapi/orderlookupstatus)
    public var status: OrderLookupStatus?

    /// The in-app purchase transactions of the order, signed by Apple, in JSON Web Signature (JWS) format.
    ///
    /// [JWSTransaction](https://developer.apple.com/documentation/appstoreserverapi/jwstransaction)
    ///
    /// Verify each like any other signed transaction.
    public var signedTransactions: [String]?

    public init(status: OrderLookupStatus? = nil, signedTransactions: [String]? = nil) {
        self.status = status
        self.signedTransactions = signedTransactions
    }
}
