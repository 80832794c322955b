import Foundation

/// Reads a JWS payload without verifying it, only to name what was rejected (a rejected
/// notification's UUID and type in a report). Never use it to decide anything.
public enum UnverifiedPayload {
    public static func decode<Payload: Decodable>(_ jws: String, as type: Payload.Type) -> Payload? {
        guard let token = try? CompactJWS(jws) else { return nil }
        return try? JSONDecoder().decode(Payload.self, from: Data(token.payload))
    }
}

extension UnverifiedPayload {
    /// What a notification claims about itself, read member by member from its JSON without
    /// decoding it into ``ResponseBodyV2DecodedPayload``: a notification that does not decode (a
    /// field of a shape Apple added later) is still named and filed under its app. Each member is
    /// `nil` when absent or not a string; never use it to decide anything but where to file it.
    public struct NotificationClaims: Sendable, Equatable {
        public var notificationUUID: String?
        public var notificationType: String?
        public var subtype: String?
        /// From `data`, else `summary`, else `appData` (as ``ResponseBodyV2DecodedPayload/appIdentity`` reads them).
        public var bundleId: String?
        public var environment: String?

        /// `TYPE` or `TYPE/SUBTYPE`, as reports name a notification.
        public var typeAndSubtype: String? { notificationType.map { type in subtype.map { "\(type)/\($0)" } ?? type } }
    }

    public static func notificationClaims(_ jws: String) -> NotificationClaims {
        guard let token = try? CompactJWS(jws),
            let object = (try? JSONSerialization.jsonObject(with: Data(token.payload))) as? [String: Any]
        else { return NotificationClaims() }
        let app = ["data", "summary", "appData"].lazy.compactMap { object[$0] as? [String: Any] }.first ?? [:]
        return NotificationClaims(
            notificationUUID: object["notificationUUID"] as? String, notificationType: object["notificationType"] as? String,
            subtype: object["subtype"] as? String, bundleId: app["bundleId"] as? String, environment: app["environment"] as? String)
    }
}
