import AppStoreServer
import Crypto
import Foundation
import SwiftASN1
import X509

/// Signs payloads as the App Store does: compact JWS, ES256, with `x5c` = [leaf, intermediate, root].
///
/// ```swift
/// let jws = try SigningCertificateAuthority().signer.sign(transaction)
/// ```
public struct JWSSigner: Sendable {
    public let key: P256.Signing.PrivateKey
    /// Base64 DER of each certificate, in `x5c` order.
    public let x5c: [String]
    private let encodedHeader: String

    public init(key: P256.Signing.PrivateKey, chain: [Certificate], algorithm: String = "ES256") {
        self.key = key
        self.x5c = chain.map { Data(SigningCertificateAuthority.der($0)).base64EncodedString() }
        self.encodedHeader = Self.encodeHeader(alg: algorithm, x5c: x5c)
    }

    /// A signer with a hand-made header, to build forged tokens in tests.
    public init(key: P256.Signing.PrivateKey, rawHeaderJSON: String) {
        self.key = key
        self.x5c = []
        self.encodedHeader = Base64URL.encode(Data(rawHeaderJSON.utf8))
    }

    /// Signs a value encoded as JSON; `nil` optionals are left out as Apple does.
    public func sign<Payload: Encodable>(_ payload: Payload) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return try sign(payloadJSON: try encoder.encode(payload))
    }

    /// Signs raw JSON bytes.
    public func sign(payloadJSON: Data) throws -> String {
        let signingInput = "\(encodedHeader).\(Base64URL.encode(payloadJSON))"
        let signature = try key.signature(for: Data(signingInput.utf8))
        return "\(signingInput).\(Base64URL.encode(signature.rawRepresentation))"
    }

    private static func encodeHeader(alg: String, x5c: [String]) -> String {
        struct Header: Encodable { var alg: String; var x5c: [String] }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Base64URL.encode(try! encoder.encode(Header(alg: alg, x5c: x5c)))
    }
}
