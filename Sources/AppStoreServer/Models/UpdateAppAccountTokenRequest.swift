/// The request body of Set App Account Token: the UUID to set as the purchase's `appAccountToken`.
///
/// [UpdateAppAccountTokenRequest](https://developer.apple.com/documentation/appstoreserverapi/updateappaccounttokenrequest)
///
/// Apple answers 400 InvalidAppAccountTokenUUIDError (4000183) for a value that is not a UUID.
///
/// ```swift
/// let body = UpdateAppAccountTokenRequest(appAccountToken: "7e3fb20b-4cdb-47cc-936d-99d65f608138")
/// ```
public struct UpdateAppAccountTokenRequest: Codable, Hashable, Sendable {
    /// The UUID that identifies the customer in the app's own systems.
    ///
    /// [appAccountToken](https://developer.apple.com/documentation/appstoreserverapi/appaccounttoken)
    public var appAccountToken: String

    public init(appAccountToken: String) {
        self.appAccountToken = appAccountToken
    }
}
