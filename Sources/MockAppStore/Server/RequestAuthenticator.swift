import AppStoreServer
import Crypto
import Foundation

/// Checks the App Store Server API JWT of every request: ES256 by the team key the mock handed
/// out, the right `kid`, `iss` and `aud`, a `bid` naming one of the apps the key serves, not
/// expired, and living at most 60 minutes. The `bid` then routes the request to its app.
struct RequestAuthenticator: Sendable {
    let publicKey: P256.Signing.PublicKey
    let keyId: String
    let issuerId: String
    /// The apps the key serves.
    let bundleIds: Set<String>

    /// Why a request is not authenticated.
    struct Refusal: Error, CustomStringConvertible {
        var description: String
    }

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

    /// The app (`bid`) of an authenticated request, otherwise why it is not authenticated.
    func check(authorization: String?, now: Date = Date()) -> Result<String, Refusal> {
        func refuse(_ reason: String) -> Result<String, Refusal> { .failure(Refusal(description: reason)) }
        guard let authorization, authorization.hasPrefix("Bearer ") else { return refuse("no bearer token") }
        let token = String(authorization.dropFirst("Bearer ".count))
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerData = Base64URL.decode(parts[0].utf8).map({ Data($0) }),
            let claimsData = Base64URL.decode(parts[1].utf8).map({ Data($0) }), let signatureData = Base64URL.decode(parts[2].utf8),
            let header = try? JSONDecoder().decode(Header.self, from: headerData),
            let claims = try? JSONDecoder().decode(Claims.self, from: claimsData)
        else { return refuse("malformed token") }
        guard header.alg == "ES256" else { return refuse("alg must be ES256") }
        guard header.kid == keyId else { return refuse("unknown key id") }
        guard let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureData),
            publicKey.isValidSignature(signature, for: Data("\(parts[0]).\(parts[1])".utf8))
        else { return refuse("bad signature") }
        guard claims.iss == issuerId else { return refuse("wrong issuer") }
        guard claims.aud == "appstoreconnect-v1" else { return refuse("wrong audience") }
        guard let bundleId = claims.bid, bundleIds.contains(bundleId) else { return refuse("unknown bundle id") }
        let nowSeconds = now.timeIntervalSince1970
        guard let exp = claims.exp, exp > nowSeconds else { return refuse("expired") }
        if let iat = claims.iat {
            guard iat <= nowSeconds + 60 else { return refuse("issued in the future") }
            guard exp - iat <= 3600 else { return refuse("lives longer than 60 minutes") }
        } else {
            guard exp <= nowSeconds + 3600 else { return refuse("lives longer than 60 minutes") }
        }
        return .success(bundleId)
    }
}
