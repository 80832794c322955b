import Crypto
import Foundation

/// A compact JWS (`header.payload.signature`) taken apart for storage: the header segment as
/// signed (the `x5c` chain makes it about 4.4 KB, and one signing certificate signs millions of
/// values, so it is stored once, by ``headerSHA256``), the payload's decoded bytes verbatim (not
/// re-serialised JSON) and the signature's bytes. ``compact`` puts them back together.
///
/// Only a value that rebuilds byte for byte is taken apart: Apple writes canonical base64url
/// (no padding, no stray bits), so re-encoding the decoded bytes gives the same segments; a value
/// that does not (``init(exactly:)`` returns `nil`) must be stored whole.
///
/// ```swift
/// guard let parts = JWSParts(exactly: signedPayload) else { storeWhole(signedPayload); return }
/// assert(parts.compact == signedPayload)
/// ```
public struct JWSParts: Sendable, Hashable {
    /// The header segment exactly as signed (base64url of `{"alg":"ES256","x5c":[...]}`).
    public let encodedHeader: String
    /// The payload, decoded from base64url: the JSON bytes the App Store signed.
    public let payload: [UInt8]
    /// The signature, decoded from base64url (64 bytes for ES256).
    public let signature: [UInt8]
    /// The key the header is stored under: SHA-256 of the header segment's bytes.
    public let headerSHA256: [UInt8]

    /// Takes `jws` apart; `nil` unless its parts rebuild exactly `jws` (three segments, payload
    /// and signature in canonical base64url).
    public init?(exactly jws: String) {
        self.init(exactly: jws, sameHeaderAs: nil)
    }

    /// ``init(exactly:)``, reusing `other`'s header hash when the header is byte for byte the same
    /// (a notification's nested values are signed with its own certificate).
    init?(exactly jws: String, sameHeaderAs other: JWSParts?) {
        let bytes = Array(jws.utf8)
        let dots = CompactJWS.dots(in: bytes, upTo: 3)
        guard dots.count == 2, dots[0] > 0 else { return nil }
        let (firstDot, secondDot) = (dots[0], dots[1])
        // What is stored must give back exactly what was signed: only canonical segments decode
        // here, and re-encoding a canonical segment's bytes gives the segment itself.
        guard let payload = Base64URL.decodeCanonical(bytes[(firstDot + 1)..<secondDot]),
            let signature = Base64URL.decodeCanonical(bytes[(secondDot + 1)...])
        else { return nil }
        let header = String(decoding: bytes[..<firstDot], as: UTF8.self)
        if let other, other.encodedHeader == header {
            self.init(encodedHeader: other.encodedHeader, headerSHA256: other.headerSHA256, payload: payload, signature: signature)
        } else {
            self.init(encodedHeader: header, payload: payload, signature: signature)
        }
        assert(compact == jws, "a JWS taken apart does not rebuild")
    }

    /// Parts read back from storage.
    public init(encodedHeader: String, payload: [UInt8], signature: [UInt8]) {
        self.init(encodedHeader: encodedHeader, headerSHA256: Self.sha256(encodedHeader), payload: payload, signature: signature)
    }

    /// Parts read back from storage with the hash their header is stored under (not computed again).
    public init(encodedHeader: String, headerSHA256: [UInt8], payload: [UInt8], signature: [UInt8]) {
        self.encodedHeader = encodedHeader
        self.headerSHA256 = headerSHA256
        self.payload = payload
        self.signature = signature
    }

    /// The same value with another payload (a notification's, once its nested values are cut out or put back).
    func with(payload: [UInt8]) -> JWSParts {
        JWSParts(encodedHeader: encodedHeader, headerSHA256: headerSHA256, payload: payload, signature: signature)
    }

    /// The JWS, rebuilt: `header.base64url(payload).base64url(signature)`.
    public var compact: String {
        encodedHeader + "." + Base64URL.encode(payload) + "." + Base64URL.encode(signature)
    }

    /// SHA-256 of a text's UTF-8 bytes: the key of a stored header, and the hash a stored value
    /// keeps after its payload is pruned (the quarantine names payloads by the same hash, in hex).
    public static func sha256(_ text: String) -> [UInt8] {
        Array(SHA256.hash(data: Array(text.utf8)))
    }
}

/// A notification's `signedPayload` taken apart for storage: the notification's own parts, whose
/// payload has the contents of its nested signed values (`data.signedTransactionInfo`,
/// `data.signedRenewalInfo`) cut out, each nested value's parts, and where each goes back. The
/// notification and its nested values are usually signed with one certificate, so all three
/// headers are one stored header, and nothing signed is stored twice.
///
/// The payload keeps its JSON shape (a nested value's quotes stay, empty), so it stays readable;
/// ``offset`` is where the nested value's characters go back, in the cut payload's bytes.
///
/// ```swift
/// let parts = NotificationPayloadParts(signedPayload, nested: [.signedTransactionInfo: info])
/// assert(parts?.compact == signedPayload)
/// ```
public struct NotificationPayloadParts: Sendable, Hashable {
    /// A nested signed value of a notification.
    public enum Field: String, Sendable, Hashable, CaseIterable {
        case signedTransactionInfo
        case signedRenewalInfo
    }

    /// One nested value: its parts and where in the cut payload its characters go back.
    public struct Nested: Sendable, Hashable {
        public let field: Field
        public let offset: Int
        public let parts: JWSParts

        public init(field: Field, offset: Int, parts: JWSParts) {
            self.field = field
            self.offset = offset
            self.parts = parts
        }
    }

    /// The notification's own header and signature, with its payload's nested values cut out.
    public let notification: JWSParts
    /// The nested values cut out, in the order they appear.
    public let nested: [Nested]

    /// The notification's parts and its nested values', each of whose headers is stored once.
    public var allParts: [JWSParts] { [notification] + nested.map(\.parts) }

    /// Parts read back from storage.
    public init(notification: JWSParts, nested: [Nested]) {
        self.notification = notification
        self.nested = nested.sorted { $0.offset < $1.offset }
    }

    /// Takes a notification apart, cutting out the nested values given (the strings its payload
    /// holds, as the verifier decoded them); `nil` unless the parts rebuild `signedPayload` byte for
    /// byte. A nested value that is not found verbatim in the payload, or does not rebuild exactly
    /// itself, stays inside the payload.
    public init?(_ signedPayload: String, nested values: [Field: String]) {
        guard let whole = JWSParts(exactly: signedPayload) else { return nil }
        // Where each nested value's characters are in the payload, first to last.
        var found: [(field: Field, range: Range<Int>, parts: JWSParts)] = []
        for (field, value) in values where !value.isEmpty {
            guard let parts = JWSParts(exactly: value, sameHeaderAs: whole), let range = Self.range(of: value, inQuotesIn: whole.payload) else {
                continue
            }
            found.append((field, range, parts))
        }
        found.sort { $0.range.lowerBound < $1.range.lowerBound }
        var cut: [UInt8] = []
        cut.reserveCapacity(whole.payload.count)
        var nested: [Nested] = []
        var position = 0
        for value in found where value.range.lowerBound >= position {
            cut.append(contentsOf: whole.payload[position..<value.range.lowerBound])
            nested.append(Nested(field: value.field, offset: cut.count, parts: value.parts))
            position = value.range.upperBound
        }
        cut.append(contentsOf: whole.payload[position...])
        self.init(notification: whole.with(payload: cut), nested: nested)
        // Exact by construction: each nested value's parts rebuild its characters (canonical
        // segments), which go back where they were cut from, and the whole's segments are canonical.
        assert(compact == signedPayload, "a notification taken apart does not rebuild")
    }

    /// The notification's payload with its nested values put back: the JSON Apple signed.
    public var payload: [UInt8] {
        var payload = notification.payload
        for value in nested.reversed() where value.offset <= payload.count {
            payload.insert(contentsOf: Array(value.parts.compact.utf8), at: value.offset)
        }
        return payload
    }

    /// The notification's `signedPayload`, rebuilt.
    public var compact: String {
        notification.with(payload: payload).compact
    }

    /// A nested value, rebuilt.
    public func compact(_ field: Field) -> String? {
        nested.first { $0.field == field }?.parts.compact
    }

    /// The range of `value`'s characters in `payload` where they form a whole JSON string
    /// (`"value"`), the first such occurrence.
    private static func range(of value: String, inQuotesIn payload: [UInt8]) -> Range<Int>? {
        let needle = Array(value.utf8)
        guard !needle.isEmpty, payload.count >= needle.count + 2 else { return nil }
        return payload.withUnsafeBytes { payload in
            needle.withUnsafeBytes { needle in
                let first = needle[0]
                var start = 1
                while start + needle.count < payload.count {
                    // Compared as memory: a generic element-by-element comparison of the ~6 KB value
                    // was a percent of serve's CPU.
                    if payload[start] == first, payload[start - 1] == UInt8(ascii: "\""), payload[start + needle.count] == UInt8(ascii: "\""),
                        memcmp(payload.baseAddress! + start, needle.baseAddress!, needle.count) == 0
                    {
                        return start..<(start + needle.count)
                    }
                    start += 1
                }
                return nil
            }
        }
    }
}
