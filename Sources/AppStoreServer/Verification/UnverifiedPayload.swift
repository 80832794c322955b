import Foundation

/// Reads a JWS payload without verifying it, only to name what was rejected (a rejected
/// notification's UUID and type in a report). Never use it to decide anything.
public enum UnverifiedPayload {
    public static func decode<Payload: Decodable>(_ jws: String, as type: Payload.Type) -> Payload? {
        guard let token = try? CompactJWS(jws) else { return nil }
        return try? JSONDecoder().decode(Payload.self, from: Data(token.payload))
    }
}
