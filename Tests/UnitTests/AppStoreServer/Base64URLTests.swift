import AppStoreServer
import Foundation
import Testing

/// Base64url against Foundation's base64 (alphabet swapped, padding dropped), and the canonical
/// decoding that storage relies on: only what `encode` writes decodes, so re-encoding gives it back.
@Suite struct Base64URLTests {
    static func reference(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    @Test func everyLengthEncodesAsFoundationDoesAndDecodesBack() {
        var generator = SystemRandomNumberGenerator()
        for count in Array(0...67) + [4_411, 18_000] {
            let bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let encoded = Base64URL.encode(bytes)
            #expect(encoded == Self.reference(bytes), "\(count) bytes")
            #expect(Base64URL.decode(encoded.utf8) == bytes, "\(count) bytes")
            #expect(Base64URL.decodeCanonical(encoded.utf8) == bytes, "\(count) bytes")
            // Not contiguous: the same bytes through the generic path.
            #expect(Base64URL.encode(AnySequence(bytes)) == encoded)
            #expect(Base64URL.decode(AnyCollection(encoded.utf8)) == bytes)
        }
    }

    @Test func lenientDecodingAcceptsPaddingAndTheStandardAlphabetCanonicalDoesNot() {
        let bytes: [UInt8] = [0xFB, 0xFF, 0xBF, 0x01]
        let standard = Data(bytes).base64EncodedString()  // "+/+/AQ=="
        #expect(standard.contains("+") && standard.hasSuffix("=="))
        #expect(Base64URL.decode(standard.utf8) == bytes)
        #expect(Base64URL.decodeCanonical(standard.utf8) == nil)
        #expect(Base64URL.decodeCanonical(standard.replacingOccurrences(of: "=", with: "").utf8) == nil)
        #expect(Base64URL.decodeCanonical(Self.reference(bytes).utf8) == bytes)
        #expect(Base64URL.decodeCanonical((Self.reference(bytes) + "=").utf8) == nil)
    }

    @Test func strayBitsDecodeLenientlyButNotCanonically() {
        // "QQ" is 0x41; "QR" carries the same byte with a stray bit that `encode` never writes.
        #expect(Base64URL.decode("QR".utf8) == [0x41])
        #expect(Base64URL.decodeCanonical("QR".utf8) == nil)
        #expect(Base64URL.decodeCanonical("QQ".utf8) == [0x41])
        // Three characters, two bytes: two unused bits.
        #expect(Base64URL.decode("QUJ".utf8) == [0x41, 0x42])
        #expect(Base64URL.decodeCanonical("QUJ".utf8) == nil)
        #expect(Base64URL.decodeCanonical("QUI".utf8) == [0x41, 0x42])
    }

    @Test(arguments: ["Q", "QUJDR", "QU.D", "QU JD", "Q=UJ", "QUJD=E", "é", "QUJD\u{0}"])
    func malformedInputDecodesToNil(_ text: String) {
        #expect(Base64URL.decode(text.utf8) == nil)
        #expect(Base64URL.decodeCanonical(text.utf8) == nil)
    }
}
