import AppStoreServer

/// A notification whose signature, chain, app, environment and nested signed values have all
/// been verified: the only thing the store accepts.
public struct VerifiedNotification: Sendable {
    /// The JWS as received.
    public let signedPayload: String
    public let payload: ResponseBodyV2DecodedPayload
    public let transaction: JWSTransactionDecodedPayload?
    public let signedTransactionInfo: String?
    public let renewalInfo: JWSRenewalInfoDecodedPayload?

    public let notificationUUID: String
    public let notificationType: NotificationTypeV2
    public let subtype: Subtype?
    public let signedDate: Int64
    public let environment: String
    /// The purchase this notification is about, if any (TEST and summaries have none).
    public let originalTransactionId: String?

    init(signedPayload: String, payload: ResponseBodyV2DecodedPayload, transaction: JWSTransactionDecodedPayload?,
         signedTransactionInfo: String?, renewalInfo: JWSRenewalInfoDecodedPayload?, environment: String) {
        self.signedPayload = signedPayload
        self.payload = payload
        self.transaction = transaction
        self.signedTransactionInfo = signedTransactionInfo
        self.renewalInfo = renewalInfo
        // The verifier guarantees these are present.
        self.notificationUUID = payload.notificationUUID ?? ""
        self.notificationType = payload.notificationType ?? NotificationTypeV2(rawValue: "")
        self.subtype = payload.subtype
        self.signedDate = payload.signedDate ?? 0
        self.environment = environment
        self.originalTransactionId = transaction?.originalTransactionId ?? renewalInfo?.originalTransactionId
    }

    /// `TYPE` or `TYPE/SUBTYPE`, as reports show it.
    public var typeAndSubtype: String {
        subtype.map { "\(notificationType.rawValue)/\($0.rawValue)" } ?? notificationType.rawValue
    }
}
