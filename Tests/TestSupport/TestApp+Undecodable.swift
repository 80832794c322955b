package import AppStoreServer
import Foundation
package import MockAppStore

extension TestApp {
    /// A genuine SUBSCRIBED notification of a shape this release does not decode: its
    /// `data.status` comes as a word, not Apple's number. Signed by the app's (trusted) authority,
    /// or by `signer`; with `naming: false`, its `data` names no app or environment either.
    package func undecodableNotification(uuid: String, original: String, signer: JWSSigner? = nil, naming: Bool = true) throws -> String {
        let signer = signer ?? authority.signer
        let payload = ResponseBodyV2DecodedPayload(
            notificationType: .subscribed, subtype: .initialBuy, notificationUUID: uuid, signedDate: start + 1_000,
            data: NotificationData(
                appAppleId: Self.appAppleId, bundleId: Self.bundleId, environment: environment,
                signedTransactionInfo: try signer.sign(subscription(original: original, period: 0, signedDate: start)), status: .active))
        guard var object = try JSONSerialization.jsonObject(with: try JSONEncoder().encode(payload)) as? [String: Any],
            var data = object["data"] as? [String: Any]
        else { throw CocoaError(.coderInvalidValue) }
        data["status"] = "ACTIVE"
        if !naming { (data["bundleId"], data["environment"]) = (nil, nil) }
        object["data"] = data
        return try signer.sign(payloadJSON: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]))
    }
}
