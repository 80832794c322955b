public import Crypto
public import Foundation
import Synchronization

/// Signs the ES256 JWTs the App Store Server API expects, and reuses one until shortly before
/// it expires instead of signing one per request.
///
/// Header `{"alg":"ES256","kid":…,"typ":"JWT"}`; claims `iss`, `iat`, `exp`, `aud`
/// (`appstoreconnect-v1`) and `bid`. Apple refuses tokens that live longer than 60 minutes.
public final class APIAuthenticationTokens: Sendable {
    public struct Configuration: Sendable {
        public var privateKey: P256.Signing.PrivateKey
        public var keyId: String
        public var issuerId: String
        public var bundleId: String
        /// How long a token is valid; must stay well under Apple's 60 minutes.
        public var lifetime: Duration
        /// A token is replaced when less than this is left of its lifetime.
        public var renewalMargin: Duration

        public init(
            privateKey: P256.Signing.PrivateKey, keyId: String, issuerId: String, bundleId: String,
            lifetime: Duration = .seconds(20 * 60), renewalMargin: Duration = .seconds(120)
        ) {
            self.privateKey = privateKey
            self.keyId = keyId
            self.issuerId = issuerId
            self.bundleId = bundleId
            self.lifetime = lifetime
            self.renewalMargin = renewalMargin
        }
    }

    private struct Token {
        var value: String
        var expiresAt: Date
    }

    public let configuration: Configuration
    private let current = Mutex<Token?>(nil)
    private let signedCount = Atomic<Int>(0)

    public init(configuration: Configuration) {
        self.configuration = configuration
    }

    /// Reads a `.p8` In-App Purchase key (PKCS#8 PEM, or SEC1 PEM).
    public static func loadPrivateKey(path: String) throws -> P256.Signing.PrivateKey {
        let pem: String
        do {
            pem = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw KeyError(description: "cannot read the private key file \(path): \(error.localizedDescription)")
        }
        do {
            return try P256.Signing.PrivateKey(pemRepresentation: pem)
        } catch {
            // Never echo the key itself.
            throw KeyError(description: "\(path) is not a P-256 private key in PEM (PKCS#8 .p8) format")
        }
    }

    public struct KeyError: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    /// How many tokens were signed so far (for tests and statistics).
    public var tokensSigned: Int { signedCount.load(ordering: .relaxed) }

    /// A valid token, signing a new one only when the current one is close to expiry.
    public func token(now: Date = Date()) throws -> String {
        try current.withLock { current in
            let margin = Double(configuration.renewalMargin.components.seconds)
            if let token = current, token.expiresAt.timeIntervalSince(now) > margin {
                return token.value
            }
            let issuedAt = Int64(now.timeIntervalSince1970)
            let expiresAt = issuedAt + configuration.lifetime.components.seconds
            let value = try sign(issuedAt: issuedAt, expiresAt: expiresAt)
            current = Token(value: value, expiresAt: Date(timeIntervalSince1970: Double(expiresAt)))
            signedCount.add(1, ordering: .relaxed)
            return value
        }
    }

    private struct Header: Encodable {
        let alg = "ES256"
        var kid: String
        let typ = "JWT"
    }

    private struct Claims: Encodable {
        var iss: String
        var iat: Int64
        var exp: Int64
        let aud = "appstoreconnect-v1"
        var bid: String
    }

    private func sign(issuedAt: Int64, expiresAt: Int64) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let header = Base64URL.encode(try encoder.encode(Header(kid: configuration.keyId)))
        let claims = Base64URL.encode(
            try encoder.encode(
                Claims(
                    iss: configuration.issuerId, iat: issuedAt, exp: expiresAt, bid: configuration.bundleId)))
        let signingInput = "\(header).\(claims)"
        let signature = try configuration.privateKey.signature(for: Data(signingInput.utf8))
        return "\(signingInput).\(Base64URL.encode(signature.rawRepresentation))"
    }
}
