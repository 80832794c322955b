import Foundation
package import ReconcilerDomain

/// Reads an import file record by record, streaming (memory stays flat in the file's size):
/// RFC 4180 CSV (UTF-8, an optional BOM, LF or CRLF, quoted fields with commas, line breaks and
/// doubled quotes) with a header of exact, case-sensitive column names in any order, or JSONL
/// (one object a line). Blank lines are skipped and counted. Each record is a valid row or an
/// invalid one with its line (the physical line where the record starts) and reason.
///
/// ```swift
/// var reader = ImportFileReader(format: .csv, source: .file(handle))
/// while let record = try reader.next() { ... }
/// ```
///
/// A header it cannot use (an unknown or repeated column, neither ID column, no header at all)
/// throws ``ReconcilerError`` (`invalidInput`): no row of such a file can be read.
package struct ImportFileReader {
    /// The columns, exact and case-sensitive.
    package enum Column: String, CaseIterable, Sendable {
        case transactionId, orderId, appUserId
    }

    /// The longest record read in full; a longer one is an invalid row, skipped without being kept.
    package static let longestRecord = 65_536
    /// The longest `appUserId`, in Unicode scalars.
    package static let longestAppUserId = 255

    package let format: ImportFormat
    private let source: ImportByteSource
    private var buffer: [UInt8] = []
    private var position = 0
    private var atEnd = false
    private var started = false
    /// The physical line the reader is on (1-based).
    private var line = 1
    private var columns: [Column]?
    /// Blank lines skipped so far.
    package private(set) var blankLines = 0

    package init(format: ImportFormat, source: ImportByteSource) {
        self.format = format
        self.source = source
    }

    /// The next record, or `nil` at the end of the file.
    package mutating func next() throws -> ImportRecord? {
        if !started {
            started = true
            // An optional UTF-8 byte order mark.
            if peek() == 0xEF, peek(1) == 0xBB, peek(2) == 0xBF { position += 3 }
        }
        switch format {
        case .csv: return try nextCSV()
        case .jsonl: return try nextJSONLine()
        }
    }

    // MARK: Bytes

    private mutating func peek(_ ahead: Int = 0) -> UInt8? {
        while position + ahead >= buffer.count {
            guard !atEnd else { return nil }
            refill()
        }
        return buffer[position + ahead]
    }

    private mutating func refill() {
        buffer.removeSubrange(0..<position)
        position = 0
        do {
            if let chunk = try source.read() { buffer += chunk } else { atEnd = true }
        } catch {
            readError = error
            atEnd = true
        }
    }

    private var readError: (any Error)?

    private mutating func take() -> UInt8? {
        guard let byte = peek() else { return nil }
        position += 1
        return byte
    }

    /// Skips a blank line at the reader's position (LF or CRLF alone), counting it; false when the line is not blank.
    private mutating func skipBlankLine() -> Bool {
        if peek() == lf {
            position += 1
        } else if peek() == cr, peek(1) == lf {
            position += 2
        } else {
            return false
        }
        line += 1
        blankLines += 1
        return true
    }

    private func checkRead() throws {
        if let readError { throw ReconcilerError(.invalidInput, "the import file cannot be read: \(readError)") }
    }

    // MARK: CSV

    /// One CSV record: its fields, or why it cannot be read.
    private struct RawRecord {
        var line: Int
        var fields: [[UInt8]] = []
        var problem: String?
    }

    private mutating func nextCSV() throws -> ImportRecord? {
        if columns == nil {
            guard let header = try nextRawCSV() else {
                throw ReconcilerError(.invalidInput, "the import file is empty: it needs a header row (transactionId, orderId, appUserId)")
            }
            columns = try Self.columns(of: header)
        }
        guard let columns, let record = try nextRawCSV() else { return nil }
        if let problem = record.problem { return .invalid(.init(line: record.line, reason: problem)) }
        guard record.fields.count == columns.count else {
            return .invalid(
                .init(
                    line: record.line,
                    reason: "\(record.fields.count) field\(record.fields.count == 1 ? "" : "s") where the header has \(columns.count)"))
        }
        var values: [Column: String] = [:]
        for (column, bytes) in zip(columns, record.fields) {
            guard let text = String(validating: bytes, as: UTF8.self) else {
                return .invalid(.init(line: record.line, reason: "\(column.rawValue) is not UTF-8"))
            }
            values[column] = text
        }
        return Self.record(line: record.line, values)
    }

    /// The header's columns: each known, none twice, at least one of the two IDs.
    private static func columns(of header: RawRecord) throws -> [Column] {
        if let problem = header.problem { throw ReconcilerError(.invalidInput, "line \(header.line) (the header): \(problem)") }
        var columns: [Column] = []
        for bytes in header.fields {
            let name = String(decoding: bytes, as: UTF8.self)
            guard let column = Column(rawValue: name) else {
                throw ReconcilerError(
                    .invalidInput,
                    "line \(header.line) (the header): unknown column \(CustomerRepair.Selector.quoted(name)); the columns are transactionId, "
                        + "orderId and appUserId (exact, case-sensitive, in any order)")
            }
            guard !columns.contains(column) else {
                throw ReconcilerError(.invalidInput, "line \(header.line) (the header): the column \(name) appears twice")
            }
            columns.append(column)
        }
        guard columns.contains(.transactionId) || columns.contains(.orderId) else {
            throw ReconcilerError(
                .invalidInput, "line \(header.line) (the header): it needs a transactionId or an orderId column (or both)")
        }
        return columns
    }

    /// Reads one CSV record (RFC 4180), skipping and counting blank lines before it.
    private mutating func nextRawCSV() throws -> RawRecord? {
        while skipBlankLine() {}
        guard peek() != nil else {
            try checkRead()
            return nil
        }
        var record = RawRecord(line: line)
        var field: [UInt8] = []
        var size = 0
        func fail(_ problem: String) {
            if record.problem == nil { record.problem = problem }
        }
        fields: while true {
            // A field starts here.
            if peek() == quote {
                position += 1
                quoted: while true {
                    guard let byte = take() else {
                        fail("a quoted field is not closed before the end of the file")
                        break fields
                    }
                    if byte == quote {
                        if peek() == quote {
                            position += 1
                            field.append(quote)
                        } else {
                            break quoted
                        }
                    } else {
                        if byte == lf { line += 1 }
                        field.append(byte)
                    }
                    size += 1
                    if size > Self.longestRecord {
                        fail("the record is longer than \(Self.longestRecord) bytes")
                        field.removeAll(keepingCapacity: true)
                    }
                }
                // After the closing quote: a comma, the end of the line, or the end of the file.
                let ends = fieldEnds()
                if ends == nil {
                    fail("characters after the closing quote of a field (a quote inside a field is written twice)")
                    skipRestOfLine()
                }
                record.fields.append(field)
                field = []
                size += 1
                if ends == false { continue fields }
                endLine()
                break fields
            }
            while true {
                if let ends = fieldEnds() {
                    record.fields.append(field)
                    field = []
                    size += 1
                    if !ends { continue fields }
                    endLine()
                    break fields
                }
                guard let byte = take() else { break fields }
                size += 1
                if byte == quote {
                    fail("a quote inside a field that does not start with one (quote the whole field, the quote written twice)")
                    skipRestOfLine()
                    endLine()
                    break fields
                } else if size > Self.longestRecord {
                    fail("the record is longer than \(Self.longestRecord) bytes")
                    field.removeAll(keepingCapacity: true)
                } else {
                    field.append(byte)
                }
            }
        }
        try checkRead()
        if record.problem != nil { record.fields = [] }
        return record
    }

    /// At the end of a field: past its comma (`false`: another field follows), or at the end of
    /// the line or the file (`true`); `nil` anywhere else.
    private mutating func fieldEnds() -> Bool? {
        switch peek() {
        case comma?:
            position += 1
            return false
        case lf?, nil: return true
        case cr? where peek(1) == lf: return true
        default: return nil
        }
    }

    /// Past the line break that ends a record, if any.
    private mutating func endLine() {
        if peek() == cr, peek(1) == lf {
            position += 2
        } else if peek() == lf {
            position += 1
        } else {
            return
        }
        line += 1
    }

    /// Skips to the end of the physical line (not past its line break).
    private mutating func skipRestOfLine() {
        while let byte = peek(), byte != lf {
            if byte == cr, peek(1) == lf { return }
            position += 1
        }
    }

    // MARK: JSONL

    private mutating func nextJSONLine() throws -> ImportRecord? {
        while true {
            guard peek() != nil else {
                try checkRead()
                return nil
            }
            let start = line
            var bytes: [UInt8] = []
            var tooLong = false
            while let byte = peek(), byte != lf {
                position += 1
                if bytes.count < Self.longestRecord { bytes.append(byte) } else { tooLong = true }
            }
            endLine()
            try checkRead()
            if bytes.last == cr { bytes.removeLast() }
            if bytes.allSatisfy({ $0 == space || $0 == tab }) {
                blankLines += 1
                continue
            }
            guard !tooLong else { return .invalid(.init(line: start, reason: "the line is longer than \(Self.longestRecord) bytes")) }
            return Self.jsonRecord(line: start, bytes)
        }
    }

    /// A value of a JSONL object: a string, null, or (for a transaction ID) an integer.
    private enum JSONValue: Decodable {
        case string(String), integer(Int64), null, other

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if container.decodeNil() {
                self = .null
            } else if let text = try? container.decode(String.self) {
                self = .string(text)
            } else if let number = try? container.decode(Int64.self) {
                self = .integer(number)
            } else {
                self = .other
            }
        }
    }

    private static func jsonRecord(line: Int, _ bytes: [UInt8]) -> ImportRecord {
        let object: [String: JSONValue]
        do {
            object = try JSONDecoder().decode([String: JSONValue].self, from: Data(bytes))
        } catch {
            return .invalid(.init(line: line, reason: "not a JSON object on one line"))
        }
        var values: [Column: String] = [:]
        for key in object.keys.sorted() {
            guard let column = Column(rawValue: key) else {
                return .invalid(
                    .init(
                        line: line,
                        reason: "unknown key \(CustomerRepair.Selector.quoted(key)); the keys are transactionId, orderId and appUserId"))
            }
            switch object[key]! {
            case .string(let text): values[column] = text
            case .null: break
            case .integer(let number) where column == .transactionId: values[column] = String(number)
            case .integer, .other: return .invalid(.init(line: line, reason: "\(key) must be a string"))
            }
        }
        return record(line: line, values)
    }

    // MARK: Rows

    /// A row by `repair`'s rules: a transaction ID or an order ID or both, each well formed; an
    /// empty value is no value.
    private static func record(line: Int, _ values: [Column: String]) -> ImportRecord {
        func given(_ column: Column) -> String? {
            guard let value = values[column], !value.trimmingCharacters(in: .whitespaces).isEmpty else { return nil }
            return value
        }
        var row = ImportRow(line: line)
        if let text = given(.transactionId) {
            guard let id = CustomerRepair.Selector.transactionId(text) else {
                return .invalid(
                    .init(
                        line: line,
                        reason: "transactionId \(CustomerRepair.Selector.quoted(text)) is not a transaction ID (digits, e.g. 2000000123456789)"))
            }
            row.transactionId = id
        }
        if let text = given(.orderId) {
            guard let id = CustomerRepair.Selector.orderId(text) else {
                return .invalid(
                    .init(
                        line: line,
                        reason: "orderId \(CustomerRepair.Selector.quoted(text)) is not an order ID (letters and digits, e.g. MQ5Q7X2ZYB)"))
            }
            row.orderId = id
        }
        guard row.transactionId != nil || row.orderId != nil else {
            return .invalid(.init(line: line, reason: "neither a transactionId nor an orderId"))
        }
        if let user = values[.appUserId], !user.isEmpty {
            guard user.unicodeScalars.count <= longestAppUserId else {
                return .invalid(
                    .init(line: line, reason: "appUserId is \(user.unicodeScalars.count) Unicode scalars long (at most \(longestAppUserId))"))
            }
            row.appUserId = user
        }
        return .row(row)
    }
}

private let lf: UInt8 = 0x0A
private let cr: UInt8 = 0x0D
private let quote: UInt8 = 0x22
private let comma: UInt8 = 0x2C
private let space: UInt8 = 0x20
private let tab: UInt8 = 0x09

extension ImportFileReader {
    /// Why `text` cannot be an app user ID given on the command line (`--app-user-id`), by the
    /// import file's rule (not empty, at most ``longestAppUserId`` Unicode scalars); `nil` when it can.
    package static func appUserIdProblem(_ text: String) -> String? {
        let length = text.unicodeScalars.count
        guard length == 0 || length > longestAppUserId else { return nil }
        return "--app-user-id: an app user ID is 1 to \(longestAppUserId) Unicode scalars long (\(length) given)"
    }
}
