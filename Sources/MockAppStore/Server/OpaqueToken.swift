import AppStoreServer
import Crypto
import Foundation

/// Pagination tokens and revisions: a JSON cursor, base64url-encoded, with an HMAC so the mock
/// can tell a token it issued from a made-up or altered one.
struct OpaqueToken: Sendable {
    let key: SymmetricKey

    func encode(_ value: some Encodable) -> String {
        let data = (try? JSONEncoder().encode(value)) ?? Data()
        let mac = Data(HMAC<SHA256>.authenticationCode(for: data, using: key)).prefix(12)
        return Base64URL.encode(data) + "." + Base64URL.encode(mac)
    }

    func decode<Value: Decodable>(_ token: String, as type: Value.Type) -> Value? {
        let parts = token.split(separator: ".")
        guard parts.count == 2, let data = Base64URL.decode(parts[0].utf8).map({ Data($0) }), let mac = Base64URL.decode(parts[1].utf8),
            Data(HMAC<SHA256>.authenticationCode(for: data, using: key)).prefix(12) == Data(mac)
        else { return nil }
        return try? JSONDecoder().decode(Value.self, from: data)
    }

}
