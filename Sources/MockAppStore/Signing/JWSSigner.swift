import AppStoreServer
package import Crypto
package import Foundation
import SwiftASN1
package import X509

/// Signs payloads as the App Store does: compact JWS, ES256, with `x5c` = [leaf, intermediate, root].
///
/// ```swift
/// let jws = try SigningCertificateAuthority().signer.sign(transaction)
/// ```
package struct JWSSigner: Sendable {
    package let key: P256.Signing.PrivateKey
    /// Base64 DER of each certificate, in `x5c` order.
    package let x5c: [String]
    private let encodedHeader: String

    package init(key: P256.Signing.PrivateKey, chain: [Certificate], algorithm: String = "ES256") {
        self.key = key
        self.x5c = chain.map { Data(SigningCertificateAuthority.der($0)).base64EncodedString() }
        self.encodedHeader = Self.encodeHeader(alg: algorithm, x5c: x5c)
    }

    /// A signer with a hand-made header, to build forged tokens in tests.
    package init(key: P256.Signing.PrivateKey, rawHeaderJSON: String) {
        self.key = key
        self.x5c = []
        self.encodedHeader = Base64URL.encode(Data(rawHeaderJSON.utf8))
    }

    /// Signs a value encoded as JSON; `nil` optionals are left out as Apple does.
    package func sign<Payload: Encodable>(_ payload: Payload) throws -> String {
        try sign(payloadJSON: try Self.encode(payload))
    }

    /// Signs raw JSON bytes.
    package func sign(payloadJSON: Data) throws -> String {
        let signingInput = signingInput(payloadJSON: payloadJSON)
        return compact(signingInput: signingInput, signature: try signature(signingInput: signingInput))
    }

    /// The JSON bytes ``sign(_:)`` signs for a value.
    static func encode<Payload: Encodable>(_ payload: Payload) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(payload)
    }

    /// `header.payload`, the part of a compact JWS the signature covers.
    func signingInput(payloadJSON: Data) -> String {
        "\(encodedHeader).\(Self.base64URL(payloadJSON))"
    }

    /// A fresh ES256 signature (ECDSA is randomised: each call gives other bytes), raw r‖s.
    func signature(signingInput: String) throws -> Data {
        try key.signature(for: Data(signingInput.utf8)).rawRepresentation
    }

    /// The compact JWS from its signing input and raw signature.
    func compact(signingInput: String, signature: Data) -> String {
        "\(signingInput).\(Self.base64URL(signature))"
    }

    /// Base64url without padding, as ``Base64URL/encode(_:)`` writes it, through Foundation's
    /// encoder: several times faster on the kilobytes of a payload, which the scale mode signs by the million.
    static func base64URL(_ data: Data) -> String {
        var bytes = Array(data.base64EncodedString().utf8)
        while bytes.last == UInt8(ascii: "=") { bytes.removeLast() }
        for index in bytes.indices {
            switch bytes[index] {
            case UInt8(ascii: "+"): bytes[index] = UInt8(ascii: "-")
            case UInt8(ascii: "/"): bytes[index] = UInt8(ascii: "_")
            default: break
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func encodeHeader(alg: String, x5c: [String]) -> String {
        struct Header: Encodable {
            var alg: String
            var x5c: [String]
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Base64URL.encode(try! encoder.encode(Header(alg: alg, x5c: x5c)))
    }
}
