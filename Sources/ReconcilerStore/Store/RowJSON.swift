import Foundation

/// Writes the rows a statement reads with `jsonb_populate_recordset` (and the other JSON the store
/// binds) as JSON text, straight into one buffer as the values' `encode(to:)` hands them over.
/// Foundation's `JSONEncoder` first builds a tree of every value and then writes it: for the live
/// path's rows that was about a tenth of `serve`'s CPU (`WEBHOOK_PROFILE=1 jobs/dev/benchmark webhook`).
///
/// The JSON means what Foundation's would (PostgreSQL reads values, not spelling): the same keys
/// in the same order, a `nil` written by `encodeIfPresent` left out. What this writer does not
/// spell as Foundation would (`Double`, `Float`, `Date`, `Data`, `URL`, `Decimal`, a super-encoder,
/// a container written to after a later one began) makes it hand the whole value to `JSONEncoder`.
///
/// ```swift
/// let text = try RowJSON.encode(rows)  // `[{"transaction_id":"2000…","quantity":1},…]`
/// ```
package enum RowJSON {
    /// `value` as JSON text.
    package static func encode(_ value: some Encodable) throws -> String {
        let writer = Writer()
        do {
            try writer.value(value)
            // Handed over even when a value's own code caught the error (`try?`) and went on.
            if !writer.handedOver { return writer.finish() }
        } catch is NotWrittenHere {}
        return String(decoding: try JSONEncoder().encode(value), as: UTF8.self)
    }

    /// `text` as a JSON string, quoted and escaped.
    package static func string(_ text: String) -> String {
        let writer = Writer()
        writer.string(text)
        return writer.finish()
    }

    /// A value this writer leaves to Foundation's `JSONEncoder`.
    struct NotWrittenHere: Error {}

    /// The text so far and the containers still open, innermost last. A container may be written
    /// to only while it is open; writing to one closes the containers opened inside it.
    final class Writer {
        // Unchecked: each write is one short access of this writer's own buffers, never while
        // another is under way; the runtime's checks of every access took half the writer's time.
        @exclusivity(unchecked) private(set) var bytes: [UInt8] = []
        @exclusivity(unchecked) private var open: [(id: Int, closer: UInt8, count: Int)] = []
        private var nextId = 0
        /// Set by the first write this writer declined: the whole value goes to `JSONEncoder`.
        private(set) var handedOver = false

        init() { bytes.reserveCapacity(4096) }

        /// Declines a write: the value is handed to `JSONEncoder` (``encode(_:)``).
        func handOver() -> NotWrittenHere {
            handedOver = true
            return NotWrittenHere()
        }

        /// Writes `value` at the current position (after a key, a comma, or at the start).
        func value<Value: Encodable>(_ value: Value) throws {
            // Types whose Foundation spelling is not their `encode(to:)`'s.
            if Value.self == Date.self || Value.self == Data.self || Value.self == URL.self || Value.self == Decimal.self {
                throw handOver()
            }
            let start = bytes.count
            try value.encode(to: RowEncoder(writer: self))
            // A value that wrote nothing has no JSON spelling here.
            if bytes.count == start { throw handOver() }
        }

        /// Opens an object or array; the container's identity for later writes.
        func begin(_ opener: UInt8, closer: UInt8) -> (id: Int, depth: Int) {
            bytes.append(opener)
            nextId += 1
            open.append((nextId, closer, 0))
            return (nextId, open.count - 1)
        }

        /// Before a member of the container `id`: closes what was opened inside it and writes the comma.
        func member(of container: (id: Int, depth: Int)) throws {
            guard container.depth < open.count, open[container.depth].id == container.id else { throw handOver() }
            while open.count > container.depth + 1 { bytes.append(open.removeLast().closer) }
            if open[container.depth].count > 0 { bytes.append(UInt8(ascii: ",")) }
            open[container.depth].count += 1
        }

        func key(_ key: some CodingKey) {
            string(key.stringValue)
            bytes.append(UInt8(ascii: ":"))
        }

        func literal(_ text: StaticString) {
            text.withUTF8Buffer { bytes.append(contentsOf: $0) }
        }

        func integer(_ value: some BinaryInteger) {
            bytes.append(contentsOf: String(value).utf8)
        }

        func bool(_ value: Bool) {
            value ? literal("true") : literal("false")
        }

        /// A JSON string: `"`, `\` and control characters escaped, the rest as its UTF-8.
        func string(_ value: String) {
            bytes.append(UInt8(ascii: "\""))
            var value = value
            value.withUTF8 { utf8 in
                var plainFrom = 0
                for index in utf8.indices {
                    let byte = utf8[index]
                    guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                    bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[plainFrom..<index]))
                    plainFrom = index + 1
                    switch byte {
                    case UInt8(ascii: "\""): literal("\\\"")
                    case UInt8(ascii: "\\"): literal("\\\\")
                    case UInt8(ascii: "\n"): literal("\\n")
                    case UInt8(ascii: "\r"): literal("\\r")
                    case UInt8(ascii: "\t"): literal("\\t")
                    default:
                        let hex: [UInt8] = Array("0123456789abcdef".utf8)
                        bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
                        bytes.append(contentsOf: [hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
                    }
                }
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[plainFrom...]))
            }
            bytes.append(UInt8(ascii: "\""))
        }

        /// The text, every container closed.
        func finish() -> String {
            while let container = open.popLast() { bytes.append(container.closer) }
            return String(decoding: bytes, as: UTF8.self)
        }
    }
}

/// The `Encoder` a value writes itself to: one per value, at the writer's current position.
private final class RowEncoder: Encoder {
    let writer: RowJSON.Writer
    /// The container this value opened; asking again gives the same one, as Foundation's does.
    private var opened: (id: Int, depth: Int)?
    private var wroteSingleValue = false

    // Rows do not ask where they are; errors thrown from here carry no path.
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(writer: RowJSON.Writer) { self.writer = writer }

    /// What a super-encoder gets: every write is declined, so Foundation writes the value.
    static func unwritable(_ writer: RowJSON.Writer) -> RowEncoder {
        let encoder = RowEncoder(writer: writer)
        encoder.wroteSingleValue = true
        return encoder
    }

    private func container(_ opener: UInt8, closer: UInt8) throws -> (id: Int, depth: Int) {
        if let opened { return opened }
        guard !wroteSingleValue else { throw writer.handOver() }
        let container = writer.begin(opener, closer: closer)
        opened = container
        return container
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(RowKeyedContainer<Key>(writer: writer, container: try? container(UInt8(ascii: "{"), closer: UInt8(ascii: "}"))))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        RowUnkeyedContainer(writer: writer, container: try? container(UInt8(ascii: "["), closer: UInt8(ascii: "]")))
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        RowSingleValueContainer(encoder: self)
    }

    /// Before the single value: only one, and not beside a container.
    fileprivate func willWriteSingleValue() throws {
        guard opened == nil, !wroteSingleValue else { throw writer.handOver() }
        wroteSingleValue = true
    }
}

private struct RowKeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let writer: RowJSON.Writer
    /// `nil` when the encoder could not open it here (the write throws, and Foundation writes the value).
    let container: (id: Int, depth: Int)?
    var codingPath: [any CodingKey] { [] }

    private func member(_ key: Key) throws {
        guard let container else { throw writer.handOver() }
        try writer.member(of: container)
        writer.key(key)
    }

    mutating func encodeNil(forKey key: Key) throws {
        try member(key)
        writer.literal("null")
    }
    mutating func encode(_ value: Bool, forKey key: Key) throws {
        try member(key)
        writer.bool(value)
    }
    mutating func encode(_ value: String, forKey key: Key) throws {
        try member(key)
        writer.string(value)
    }
    mutating func encode(_ value: Double, forKey key: Key) throws { throw writer.handOver() }
    mutating func encode(_ value: Float, forKey key: Key) throws { throw writer.handOver() }
    mutating func encode(_ value: Int, forKey key: Key) throws { try integer(value, key) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { try integer(value, key) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { try integer(value, key) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { try integer(value, key) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { try integer(value, key) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { try integer(value, key) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { try integer(value, key) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { try integer(value, key) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { try integer(value, key) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { try integer(value, key) }

    private func integer(_ value: some BinaryInteger, _ key: Key) throws {
        try member(key)
        writer.integer(value)
    }

    mutating func encode<Value: Encodable>(_ value: Value, forKey key: Key) throws {
        try member(key)
        try writer.value(value)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        let nested = try? member(key)
        return KeyedEncodingContainer(
            RowKeyedContainer<NestedKey>(writer: writer, container: nested.map { writer.begin(UInt8(ascii: "{"), closer: UInt8(ascii: "}")) }))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let nested = try? member(key)
        return RowUnkeyedContainer(writer: writer, container: nested.map { writer.begin(UInt8(ascii: "["), closer: UInt8(ascii: "]")) })
    }

    mutating func superEncoder() -> any Encoder { RowEncoder.unwritable(writer) }
    mutating func superEncoder(forKey key: Key) -> any Encoder { RowEncoder.unwritable(writer) }
}

private struct RowUnkeyedContainer: UnkeyedEncodingContainer, RowValueSlot {
    let writer: RowJSON.Writer
    let container: (id: Int, depth: Int)?
    private(set) var count = 0
    var codingPath: [any CodingKey] { [] }

    init(writer: RowJSON.Writer, container: (id: Int, depth: Int)?) {
        self.writer = writer
        self.container = container
    }

    /// Before each element: the comma, and the elements opened inside the previous one closed.
    mutating func willWrite() throws {
        guard let container else { throw writer.handOver() }
        try writer.member(of: container)
        count += 1
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let nested = try? willWrite()
        return KeyedEncodingContainer(
            RowKeyedContainer<NestedKey>(writer: writer, container: nested.map { writer.begin(UInt8(ascii: "{"), closer: UInt8(ascii: "}")) }))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let nested = try? willWrite()
        return RowUnkeyedContainer(writer: writer, container: nested.map { writer.begin(UInt8(ascii: "["), closer: UInt8(ascii: "]")) })
    }

    mutating func superEncoder() -> any Encoder { RowEncoder.unwritable(writer) }
}

private struct RowSingleValueContainer: SingleValueEncodingContainer, RowValueSlot {
    let encoder: RowEncoder
    var codingPath: [any CodingKey] { [] }
    var writer: RowJSON.Writer { encoder.writer }

    func willWrite() throws { try encoder.willWriteSingleValue() }
}

/// The value writes an unkeyed and a single-value container share: each, after `willWrite`.
private protocol RowValueSlot {
    var writer: RowJSON.Writer { get }
    mutating func willWrite() throws
}

extension RowValueSlot {
    mutating func encodeNil() throws {
        try willWrite()
        writer.literal("null")
    }
    mutating func encode(_ value: Bool) throws {
        try willWrite()
        writer.bool(value)
    }
    mutating func encode(_ value: String) throws {
        try willWrite()
        writer.string(value)
    }
    mutating func encode(_ value: Double) throws { throw writer.handOver() }
    mutating func encode(_ value: Float) throws { throw writer.handOver() }
    mutating func encode(_ value: Int) throws { try integer(value) }
    mutating func encode(_ value: Int8) throws { try integer(value) }
    mutating func encode(_ value: Int16) throws { try integer(value) }
    mutating func encode(_ value: Int32) throws { try integer(value) }
    mutating func encode(_ value: Int64) throws { try integer(value) }
    mutating func encode(_ value: UInt) throws { try integer(value) }
    mutating func encode(_ value: UInt8) throws { try integer(value) }
    mutating func encode(_ value: UInt16) throws { try integer(value) }
    mutating func encode(_ value: UInt32) throws { try integer(value) }
    mutating func encode(_ value: UInt64) throws { try integer(value) }

    private mutating func integer(_ value: some BinaryInteger) throws {
        try willWrite()
        writer.integer(value)
    }

    mutating func encode<Value: Encodable>(_ value: Value) throws {
        try willWrite()
        try writer.value(value)
    }
}
