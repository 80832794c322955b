/// The response body the App Store sends in a version 2 server notification.
///
/// [responseBodyV2](https://developer.apple.com/documentation/appstoreservernotifications/responsebodyv2)
///
/// It is the request body the App Store sends to your server's notification URL.
///
/// ```json
/// {"signedPayload": "eyJhbGciOiJFUzI1NiIs..."}
/// ```
public struct ResponseBodyV2: Codable, Hashable, Sendable {
    /// The notification, signed by the App Store, in JSON Web Signature (JWS) format; decode it with ``SignedDataVerifier``.
    ///
    /// [signedPayload](https://developer.apple.com/documentation/appstoreservernotifications/signedpayload)
    public var signedPayload: String?

    public init(signedPayload: String?) {
        self.signedPayload = signedPayload
    }
}
