package import AppStoreServer
package import ReconcilerShared

/// A notification whose signature, chain, app, environment and nested signed values have all
/// been verified: the only kind of notification the store accepts. Only the handler makes one.
package struct VerifiedNotification: Sendable {
    /// The notification as received (its `signedPayload`) and decoded.
    package let notification: Verified<ResponseBodyV2DecodedPayload>
    /// Its `signedTransactionInfo` and `signedRenewalInfo`, verified.
    package let subscription: VerifiedSubscription

    package let notificationUUID: String
    package let notificationType: NotificationTypeV2
    package let subtype: Subtype?
    package let signedDate: Int64
    /// When Apple first tried to send it (the earliest `attemptDate` of its `sendAttempts` in Get
    /// Notification History), UNIX ms; `nil` when unknown (the live webhook is not told). Not signed:
    /// it comes from the history response beside the payload.
    package var firstSendAttempt: Int64?
    /// How the store keeps its `signedPayload`: the notification and its nested values taken apart
    /// (each header stored once, the payloads deflated), or `nil` when the parts would not rebuild
    /// it exactly and it is stored whole. Computed here, with the verification, so no transaction
    /// waits for it.
    package let storage: NotificationStorage?

    package init(notification: Verified<ResponseBodyV2DecodedPayload>, subscription: VerifiedSubscription) {
        self.notification = notification
        self.subscription = subscription
        // The verifier guarantees these are present.
        self.notificationUUID = notification.payload.notificationUUID ?? ""
        self.notificationType = notification.payload.notificationType ?? NotificationTypeV2(rawValue: "")
        self.subtype = notification.payload.subtype
        self.signedDate = notification.payload.signedDate ?? 0
        var nested: [NotificationPayloadParts.Field: String] = [:]
        nested[.signedTransactionInfo] = subscription.transaction?.signedValue
        nested[.signedRenewalInfo] = subscription.renewalInfo?.signedValue
        self.storage = NotificationStorage(notification.signedValue, nested: nested)
    }

    package var payload: ResponseBodyV2DecodedPayload { notification.payload }
    /// Its signed values as stored, each naming a header (``NotificationPayloadParts/allParts``).
    package var signedParts: [JWSParts] { storage?.parts.allParts ?? [] }
    package var signedPayload: String { notification.signedValue }
    package var transaction: JWSTransactionDecodedPayload? { subscription.transaction?.payload }
    package var renewalInfo: JWSRenewalInfoDecodedPayload? { subscription.renewalInfo?.payload }
    /// The purchase this notification is about, if any (TEST, summaries and tokens have none).
    package var originalTransactionId: String? { subscription.originalTransactionId }

    /// When Apple wants an answer by, for a notification that asks for one: a
    /// `CONSUMPTION_REQUEST`, 12 hours after Apple first tried to send it (else after its
    /// `signedDate`). `nil` for the others.
    package var respondBy: Timestamp? {
        guard let answerWithin = rule.answerWithin else { return nil }
        return Timestamp(millisecondsSince1970: firstSendAttempt ?? signedDate) + answerWithin
    }

    /// What its type means to the reconciler.
    package var rule: NotificationRule { NotificationRules.rule(for: notificationType) }

    /// `TYPE` or `TYPE/SUBTYPE`, as reports show it.
    package var typeAndSubtype: String {
        subtype.map { "\(notificationType.rawValue)/\($0.rawValue)" } ?? notificationType.rawValue
    }
}
