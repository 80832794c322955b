public import AppStoreServer

/// A notification whose signature, chain, app, environment and nested signed values have all
/// been verified: the only kind of notification the store accepts. Only the handler makes one.
public struct VerifiedNotification: Sendable {
    /// The notification as received (its `signedPayload`) and decoded.
    public let notification: Verified<ResponseBodyV2DecodedPayload>
    /// Its `signedTransactionInfo` and `signedRenewalInfo`, verified.
    public let subscription: VerifiedSubscription

    public let notificationUUID: String
    public let notificationType: NotificationTypeV2
    public let subtype: Subtype?
    public let signedDate: Int64
    public let environment: String

    init(notification: Verified<ResponseBodyV2DecodedPayload>, subscription: VerifiedSubscription, environment: String) {
        self.notification = notification
        self.subscription = subscription
        // The verifier guarantees these are present.
        self.notificationUUID = notification.payload.notificationUUID ?? ""
        self.notificationType = notification.payload.notificationType ?? NotificationTypeV2(rawValue: "")
        self.subtype = notification.payload.subtype
        self.signedDate = notification.payload.signedDate ?? 0
        self.environment = environment
    }

    public var payload: ResponseBodyV2DecodedPayload { notification.payload }
    public var signedPayload: String { notification.signedValue }
    public var transaction: JWSTransactionDecodedPayload? { subscription.transaction?.payload }
    public var renewalInfo: JWSRenewalInfoDecodedPayload? { subscription.renewalInfo?.payload }
    /// The purchase this notification is about, if any (TEST, summaries and tokens have none).
    public var originalTransactionId: String? { subscription.originalTransactionId }

    /// `TYPE` or `TYPE/SUBTYPE`, as reports show it.
    public var typeAndSubtype: String {
        subtype.map { "\(notificationType.rawValue)/\($0.rawValue)" } ?? notificationType.rawValue
    }
}
