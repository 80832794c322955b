/// Base64url without padding (RFC 7515 §2), on bytes: every notification the webhook receives
/// is three JWS values of about 18 KB in all, decoded on its hot path, so this works four
/// characters at a time on contiguous memory, without String or Foundation round trips.
///
/// ```swift
/// let segment = Base64URL.encode(Array(json.utf8))
/// let bytes = Base64URL.decode(segment.utf8)
/// let exact = Base64URL.decodeCanonical(segment.utf8)  // nil unless encode(exact) == segment
/// ```
public enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Sextet of each byte of the URL alphabet; 0xFF for every other byte.
    private static let canonicalTable: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(index) }
        return table
    }()

    /// ``canonicalTable`` that also accepts the standard alphabet, as lenient senders produce it.
    private static let lenientTable: [UInt8] = {
        var table = canonicalTable
        table[Int(UInt8(ascii: "+"))] = 62
        table[Int(UInt8(ascii: "/"))] = 63
        return table
    }()

    /// Decodes base64url, also the standard alphabet and trailing padding; `nil` when a byte is
    /// outside the alphabet or the length cannot be base64.
    public static func decode<Bytes: Collection<UInt8>>(_ input: Bytes) -> [UInt8]? {
        withContiguousBytes(of: input) { decode($0, canonical: false) }
    }

    /// Decodes base64url only as ``encode(_:)`` writes it (URL alphabet, no padding, unused bits
    /// zero), so that re-encoding the result gives `input` back byte for byte; `nil` otherwise.
    public static func decodeCanonical<Bytes: Collection<UInt8>>(_ input: Bytes) -> [UInt8]? {
        withContiguousBytes(of: input) { decode($0, canonical: true) }
    }

    /// Encodes bytes as base64url without padding.
    public static func encode<Bytes: Sequence<UInt8>>(_ input: Bytes) -> String {
        if let encoded = input.withContiguousStorageIfAvailable({ encode($0) }) { return encoded }
        return Array(input).withUnsafeBufferPointer { encode($0) }
    }

    private static func withContiguousBytes<Bytes: Collection<UInt8>>(
        of input: Bytes, _ body: (UnsafeBufferPointer<UInt8>) -> [UInt8]?
    ) -> [UInt8]? {
        if let decoded = input.withContiguousStorageIfAvailable(body) { return decoded }
        return Array(input).withUnsafeBufferPointer(body)
    }

    private static func decode(_ input: UnsafeBufferPointer<UInt8>, canonical: Bool) -> [UInt8]? {
        var count = input.count
        if !canonical {
            while count > 0, input[count - 1] == UInt8(ascii: "=") { count -= 1 }
        }
        let leftover = count % 4
        // A single leftover character cannot encode a byte.
        if leftover == 1 { return nil }
        let outputCount = count / 4 * 3 + (leftover == 0 ? 0 : leftover - 1)
        let table = canonical ? canonicalTable : lenientTable
        var valid = true
        let output = table.withUnsafeBufferPointer { table in
            [UInt8](unsafeUninitializedCapacity: outputCount) { output, initialized in
                var read = 0
                var written = 0
                // 0xFF marks a byte outside the alphabet; OR-ing the sextets keeps its high bit.
                while read + 4 <= count {
                    let a = table[Int(input[read])], b = table[Int(input[read + 1])]
                    let c = table[Int(input[read + 2])], d = table[Int(input[read + 3])]
                    if (a | b | c | d) & 0x80 != 0 {
                        valid = false
                        break
                    }
                    let word = UInt32(a) << 18 | UInt32(b) << 12 | UInt32(c) << 6 | UInt32(d)
                    output[written] = UInt8(truncatingIfNeeded: word >> 16)
                    output[written + 1] = UInt8(truncatingIfNeeded: word >> 8)
                    output[written + 2] = UInt8(truncatingIfNeeded: word)
                    read += 4
                    written += 3
                }
                if valid, leftover >= 2 {
                    let a = table[Int(input[read])], b = table[Int(input[read + 1])]
                    let c = leftover == 3 ? table[Int(input[read + 2])] : 0
                    // The bits after the last whole byte are zero in what `encode` writes.
                    let unusedBits = leftover == 3 ? c & 0x03 : b & 0x0F
                    if (a | b | c) & 0x80 != 0 || (canonical && unusedBits != 0) {
                        valid = false
                    } else {
                        output[written] = a << 2 | b >> 4
                        if leftover == 3 { output[written + 1] = b << 4 | c >> 2 }
                    }
                }
                initialized = valid ? outputCount : 0
            }
        }
        return valid ? output : nil
    }

    private static func encode(_ input: UnsafeBufferPointer<UInt8>) -> String {
        let outputCount = (input.count * 4 + 2) / 3
        return alphabet.withUnsafeBufferPointer { alphabet in
            String(unsafeUninitializedCapacity: outputCount) { output in
                var read = 0
                var written = 0
                while read + 3 <= input.count {
                    let word = UInt32(input[read]) << 16 | UInt32(input[read + 1]) << 8 | UInt32(input[read + 2])
                    output[written] = alphabet[Int(word >> 18 & 0x3F)]
                    output[written + 1] = alphabet[Int(word >> 12 & 0x3F)]
                    output[written + 2] = alphabet[Int(word >> 6 & 0x3F)]
                    output[written + 3] = alphabet[Int(word & 0x3F)]
                    read += 3
                    written += 4
                }
                switch input.count - read {
                case 1:
                    let word = UInt32(input[read]) << 16
                    output[written] = alphabet[Int(word >> 18 & 0x3F)]
                    output[written + 1] = alphabet[Int(word >> 12 & 0x3F)]
                    written += 2
                case 2:
                    let word = UInt32(input[read]) << 16 | UInt32(input[read + 1]) << 8
                    output[written] = alphabet[Int(word >> 18 & 0x3F)]
                    output[written + 1] = alphabet[Int(word >> 12 & 0x3F)]
                    output[written + 2] = alphabet[Int(word >> 6 & 0x3F)]
                    written += 3
                default:
                    break
                }
                return written
            }
        }
    }
}
