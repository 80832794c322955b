import Crypto
import Foundation

/// Pagination tokens and revisions: a JSON cursor, base64url-encoded, with an HMAC so the mock
/// can tell a token it issued from a made-up or altered one.
struct OpaqueToken: Sendable {
    let key: SymmetricKey

    func encode(_ value: some Encodable) -> String {
        let data = (try? JSONEncoder().encode(value)) ?? Data()
        let mac = Data(HMAC<SHA256>.authenticationCode(for: data, using: key)).prefix(12)
        return Self.base64URL(data) + "." + Self.base64URL(mac)
    }

    func decode<Value: Decodable>(_ token: String, as type: Value.Type) -> Value? {
        let parts = token.split(separator: ".")
        guard parts.count == 2, let data = RequestAuthenticator.base64URL(parts[0]), let mac = RequestAuthenticator.base64URL(parts[1]),
              Data(HMAC<SHA256>.authenticationCode(for: data, using: key)).prefix(12) == mac
        else { return nil }
        return try? JSONDecoder().decode(Value.self, from: data)
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
