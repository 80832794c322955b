/// Base64url without padding (RFC 7515 §2), on bytes: JWS segments are decoded on the hot path
/// of every replayed notification, so this avoids String and Foundation round trips.
///
/// ```swift
/// let segment = Base64URL.encode(Array(json.utf8))
/// let bytes = Base64URL.decode(segment.utf8)
/// ```
public enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    private static let decodingTable: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(index) }
        // Also accept the standard alphabet and padding, as lenient senders produce them.
        table[Int(UInt8(ascii: "+"))] = 62
        table[Int(UInt8(ascii: "/"))] = 63
        return table
    }()

    /// Decodes base64url (padding optional); `nil` when a byte is outside the alphabet.
    public static func decode<Bytes: Collection<UInt8>>(_ input: Bytes) -> [UInt8]? {
        var output = [UInt8]()
        output.reserveCapacity(input.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        var sawPadding = false
        for byte in input {
            if byte == UInt8(ascii: "=") {
                sawPadding = true
                continue
            }
            if sawPadding { return nil }
            let value = decodingTable[Int(byte)]
            if value == 0xFF { return nil }
            accumulator = (accumulator << 6) | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        // A single leftover sextet cannot encode a byte.
        if bits >= 6 { return nil }
        return output
    }

    /// Encodes bytes as base64url without padding.
    public static func encode<Bytes: Sequence<UInt8>>(_ input: Bytes) -> String {
        var output = [UInt8]()
        output.reserveCapacity((input.underestimatedCount * 4 + 2) / 3)
        var accumulator: UInt32 = 0
        var bits = 0
        for byte in input {
            accumulator = (accumulator << 8) | UInt32(byte)
            bits += 8
            while bits >= 6 {
                bits -= 6
                output.append(alphabet[Int((accumulator >> UInt32(bits)) & 0x3F)])
            }
        }
        if bits > 0 {
            output.append(alphabet[Int((accumulator << UInt32(6 - bits)) & 0x3F)])
        }
        return String(decoding: output, as: UTF8.self)
    }
}
