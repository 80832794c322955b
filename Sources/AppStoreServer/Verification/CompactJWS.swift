import Foundation

/// A compact JWS (`header.payload.signature`) split on its bytes.
///
/// Splitting a 4 KB token with `String.split` walks grapheme clusters and costs more than the
/// ES256 check itself, so this works on UTF-8 bytes.
struct CompactJWS: Sendable {
    /// The base64url header segment, used as the key of the verified-chain cache.
    let encodedHeader: Substring
    /// `header.payload` as ASCII bytes: the data the signature covers.
    let signingInput: ArraySlice<UInt8>
    let payload: [UInt8]
    let signature: [UInt8]

    init(_ token: String) throws(VerificationError) {
        let bytes = Array(token.utf8)
        let dots = Self.dots(in: bytes, upTo: 3)
        guard dots.count == 2 else {
            throw VerificationError(.malformedJWS, "expected 3 dot-separated segments, found \(dots.count + 1)")
        }
        let headerBytes = bytes[..<dots[0]]
        let payloadBytes = bytes[(dots[0] + 1)..<dots[1]]
        let signatureBytes = bytes[(dots[1] + 1)...]
        guard !headerBytes.isEmpty, !payloadBytes.isEmpty else {
            throw VerificationError(.malformedJWS, "empty header or payload segment")
        }
        guard let payload = Base64URL.decode(payloadBytes) else {
            throw VerificationError(.malformedJWS, "payload is not base64url")
        }
        guard let signature = Base64URL.decode(signatureBytes) else {
            throw VerificationError(.malformedJWS, "signature is not base64url")
        }
        self.encodedHeader = Substring(decoding: headerBytes, as: UTF8.self)
        self.signingInput = bytes[..<dots[1]]
        self.payload = payload
        self.signature = signature
    }

    /// The offsets of the first `limit` dots in `bytes` (found by `memchr`: a notification is 18 KB).
    static func dots(in bytes: [UInt8], upTo limit: Int) -> [Int] {
        bytes.withUnsafeBufferPointer { buffer -> [Int] in
            guard let base = buffer.baseAddress else { return [] }
            var dots: [Int] = []
            var start = 0
            while dots.count < limit, start < buffer.count,
                let found = memchr(base + start, Int32(UInt8(ascii: ".")), buffer.count - start)
            {
                let offset = base.distance(to: found.assumingMemoryBound(to: UInt8.self))
                dots.append(offset)
                start = offset + 1
            }
            return dots
        }
    }

    /// The decoded header. Only a header not seen before is decoded: a cached chain's key is the
    /// encoded header itself, and it is 4.4 KB of every value Apple signs.
    func decodedHeader() throws(VerificationError) -> [UInt8] {
        guard let header = Base64URL.decode(encodedHeader.utf8) else {
            throw VerificationError(.malformedJWS, "header is not base64url")
        }
        return header
    }
}

/// The protected header of an App Store JWS.
struct JWSHeader: Decodable, Sendable {
    var alg: String?
    var x5c: [String]?
}
