import AppStoreServer
import Crypto
import Foundation

/// Checks the App Store Server API JWT of every request: ES256 by the key the mock handed out,
/// the right `kid`, `iss`, `aud` and `bid`, not expired, and living at most 60 minutes.
struct RequestAuthenticator: Sendable {
    let publicKey: P256.Signing.PublicKey
    let keyId: String
    let issuerId: String
    let bundleId: String

    private struct Header: Decodable {
        var alg: String?
        var kid: String?
        var typ: String?
    }
    private struct Claims: Decodable {
        var iss: String?
        var iat: Double?
        var exp: Double?
        var aud: String?
        var bid: String?
    }

    /// `nil` when the request is authenticated, otherwise why not.
    func check(authorization: String?, now: Date = Date()) -> String? {
        guard let authorization, authorization.hasPrefix("Bearer ") else { return "no bearer token" }
        let token = String(authorization.dropFirst("Bearer ".count))
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerData = Base64URL.decode(parts[0].utf8).map({ Data($0) }),
            let claimsData = Base64URL.decode(parts[1].utf8).map({ Data($0) }), let signatureData = Base64URL.decode(parts[2].utf8),
            let header = try? JSONDecoder().decode(Header.self, from: headerData),
            let claims = try? JSONDecoder().decode(Claims.self, from: claimsData)
        else { return "malformed token" }
        guard header.alg == "ES256" else { return "alg must be ES256" }
        guard header.kid == keyId else { return "unknown key id" }
        guard let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureData),
            publicKey.isValidSignature(signature, for: Data("\(parts[0]).\(parts[1])".utf8))
        else { return "bad signature" }
        guard claims.iss == issuerId else { return "wrong issuer" }
        guard claims.aud == "appstoreconnect-v1" else { return "wrong audience" }
        guard claims.bid == bundleId else { return "wrong bundle id" }
        let nowSeconds = now.timeIntervalSince1970
        guard let exp = claims.exp, exp > nowSeconds else { return "expired" }
        if let iat = claims.iat {
            guard iat <= nowSeconds + 60 else { return "issued in the future" }
            guard exp - iat <= 3600 else { return "lives longer than 60 minutes" }
        } else {
            guard exp <= nowSeconds + 3600 else { return "lives longer than 60 minutes" }
        }
        return nil
    }

}
