/// The request body the App Store sends to your server's notification URL.
///
/// ```json
/// {"signedPayload": "eyJhbGciOiJFUzI1NiIs..."}
/// ```
public struct ResponseBodyV2: Codable, Hashable, Sendable {
    /// The notification as a JWS signed by the App Store; decode it with ``SignedDataVerifier``.
    public var signedPayload: String?

    public init(signedPayload: String?) {
        self.signedPayload = signedPayload
    }
}
