import CZlib

/// Raw DEFLATE (RFC 1951, no zlib or gzip wrapper) through the system zlib, optionally with a
/// preset dictionary, for the JSON payloads the store keeps: a notification's payload with its
/// nested transaction and renewal info is about 1.3 KB of JSON, and PostgreSQL compresses nothing
/// in a row under 2 KB. Deflate is lossless, so the bytes Apple signed come back exactly; the store
/// checks that they do before it keeps a value this way.
///
/// ```swift
/// let stored = Deflate.compress(payload, dictionary: keys)
/// assert(Deflate.decompress(stored, dictionary: keys, limit: 1 << 20) == payload)
/// ```
package enum Deflate {
    /// The window (8 KB): payloads and the preset dictionary are a few kilobytes; a small window keeps each stream's setup cheap.
    private static let windowBits: Int32 = 13

    /// The bytes, deflated (level 6, zlib's default), with `dictionary` preset when given.
    package static func compress(_ input: [UInt8], dictionary: [UInt8] = []) -> [UInt8] {
        var stream = z_stream()
        guard deflateInit2_(&stream, 6, Z_DEFLATED, -windowBits, 8, Z_DEFAULT_STRATEGY, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK
        else { preconditionFailure("zlib cannot start a deflate stream") }
        defer { deflateEnd(&stream) }
        if !dictionary.isEmpty {
            let status = dictionary.withUnsafeBufferPointer { deflateSetDictionary(&stream, $0.baseAddress, UInt32($0.count)) }
            precondition(status == Z_OK, "zlib refused the preset dictionary")
        }
        var output = [UInt8](repeating: 0, count: Int(deflateBound(&stream, UInt(input.count))))
        let produced: Int = input.withUnsafeBufferPointer { source in
            output.withUnsafeMutableBufferPointer { target in
                stream.next_in = UnsafeMutablePointer(mutating: source.baseAddress)
                stream.avail_in = UInt32(source.count)
                stream.next_out = target.baseAddress
                stream.avail_out = UInt32(target.count)
                // deflateBound leaves room for everything: one call finishes the stream.
                precondition(deflate(&stream, Z_FINISH) == Z_STREAM_END, "zlib did not finish within deflateBound")
                return target.count - Int(stream.avail_out)
            }
        }
        output.removeSubrange(produced...)
        return output
    }

    /// The bytes inflated, or `nil` when they are not one whole raw DEFLATE stream or would inflate
    /// to more than `limit` bytes (a stored value changed by hand).
    package static func decompress(_ input: [UInt8], dictionary: [UInt8] = [], limit: Int) -> [UInt8]? {
        var stream = z_stream()
        guard inflateInit2_(&stream, -15, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else { return nil }
        defer { inflateEnd(&stream) }
        if !dictionary.isEmpty {
            let status = dictionary.withUnsafeBufferPointer { inflateSetDictionary(&stream, $0.baseAddress, UInt32($0.count)) }
            guard status == Z_OK else { return nil }
        }
        var output: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: max(4096, input.count * 4))
        return input.withUnsafeBufferPointer { source -> [UInt8]? in
            stream.next_in = UnsafeMutablePointer(mutating: source.baseAddress)
            stream.avail_in = UInt32(source.count)
            while true {
                let (status, produced) = chunk.withUnsafeMutableBufferPointer { target -> (Int32, Int) in
                    stream.next_out = target.baseAddress
                    stream.avail_out = UInt32(target.count)
                    let status = inflate(&stream, Z_NO_FLUSH)
                    return (status, target.count - Int(stream.avail_out))
                }
                output.append(contentsOf: chunk[..<produced])
                guard output.count <= limit else { return nil }
                switch status {
                case Z_STREAM_END:
                    // Anything after the end of the stream is not part of it.
                    return stream.avail_in == 0 ? output : nil
                case Z_OK where produced > 0 || stream.avail_in > 0:
                    continue
                default:
                    return nil
                }
            }
        }
    }
}
