package import AppStoreServer
import Foundation

/// A signed value from Apple's API that failed verification. It is quarantined (stored once, never
/// applied) and reported by every run that meets it. A live notification whose signature and chain
/// verify but which does not decode is quarantined too (source `webhook`), and applied by
/// `reconciler rejections --retry` once a release decodes it.
package struct Rejection: Sendable, Codable, Hashable {
    /// The API response the value came in.
    package enum Source: String, Sendable, Codable, CaseIterable {
        case notificationHistory = "notification_history"
        case transactionHistory = "transaction_history"
        case subscriptionStatus = "subscription_status"
        /// Look Up Order ID (`reconciler repair --order-id`).
        case orderLookup = "order_lookup"
        /// A notification posted to the webhook, authentic but not decodable (`INVALID_PAYLOAD`,
        /// `MISSING_SIGNED_DATE`): kept so that `rejections --retry` can apply it later.
        case webhook
    }

    package var source: Source
    /// What the payload claims to be, read without trusting it; only to name it.
    package var notificationUUID: String?
    package var typeAndSubtype: String?
    package var reason: VerificationError.Reason
    package var detail: String
    package var payloadSHA256: String
    /// Whether this run quarantined it (the first run to meet it); `false`: it was known already.
    package var newlyQuarantined: Bool

    /// The signed value, kept in the quarantine; not part of reports.
    package var signedPayload: String = ""

    private enum CodingKeys: String, CodingKey {
        case source, notificationUUID, typeAndSubtype, reason, detail, payloadSHA256, newlyQuarantined
    }

    /// A rejection of `signedValue` for `error`; the one place rejections are made.
    package init(source: Source, signedValue: String, error: VerificationError) {
        self.source = source
        // Read member by member: a notification that does not decode is still named.
        let claimed = [Source.notificationHistory, .webhook].contains(source) ? UnverifiedPayload.notificationClaims(signedValue) : nil
        self.notificationUUID = claimed?.notificationUUID
        self.typeAndSubtype = claimed?.typeAndSubtype
        self.reason = error.reason
        self.detail = error.detail
        self.payloadSHA256 = SHA256Hex.digest(signedValue)
        self.newlyQuarantined = true
        self.signedPayload = signedValue
    }

    package init(
        source: Source, notificationUUID: String?, typeAndSubtype: String?, reason: VerificationError.Reason, detail: String,
        payloadSHA256: String, newlyQuarantined: Bool
    ) {
        self.source = source
        self.notificationUUID = notificationUUID
        self.typeAndSubtype = typeAndSubtype
        self.reason = reason
        self.detail = detail
        self.payloadSHA256 = payloadSHA256
        self.newlyQuarantined = newlyQuarantined
    }

    /// How reports name it: the UUID it claims, else the start of its hash.
    package var name: String { notificationUUID ?? String(payloadSHA256.prefix(16)) + "…" }
}
