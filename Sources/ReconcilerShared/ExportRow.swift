import Foundation

/// One line of an export, its keys in the order they are printed: as a JSON object on one line, or
/// as a CSV record (RFC 4180: the header is the JSON keys in that order; `null` is an empty field;
/// dates are UNIX milliseconds, as Apple sends them; Booleans `true`/`false`; a field holding a comma,
/// a quote or a line break is quoted, its quotes doubled; records end with CRLF).
///
/// ```swift
/// let row = ExportRow([("transactionId", .string("2000000100000212")), ("price", .integer(9990)), ("revocationDate", .null)])
/// print(row.csvHeader + row.csvRecord)   // "transactionId,price,revocationDate\r\n2000000100000212,9990,\r\n"
/// ```
package struct ExportRow: Sendable, Hashable {
    /// A value of an export: what JSON holds of Apple's fields.
    package enum Value: Sendable, Hashable, Codable {
        case null
        case bool(Bool)
        case integer(Int64)
        case string(String)

        package init(_ value: String?) { self = value.map(Value.string) ?? .null }
        package init(_ value: Int64?) { self = value.map(Value.integer) ?? .null }
        package init(_ value: Int32?) { self = value.map { .integer(Int64($0)) } ?? .null }
        package init(_ value: Bool?) { self = value.map(Value.bool) ?? .null }

        package init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if container.decodeNil() {
                self = .null
            } else if let bool = try? container.decode(Bool.self) {
                self = .bool(bool)
            } else if let integer = try? container.decode(Int64.self) {
                self = .integer(integer)
            } else {
                self = .string(try container.decode(String.self))
            }
        }

        package func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case .null: try container.encodeNil()
            case .bool(let bool): try container.encode(bool)
            case .integer(let integer): try container.encode(integer)
            case .string(let string): try container.encode(string)
            }
        }

        /// The CSV field: empty for null, quoted when it must be.
        var csvField: String {
            switch self {
            case .null: return ""
            case .bool(let bool): return bool ? "true" : "false"
            case .integer(let integer): return String(integer)
            case .string(let string): return ExportRow.quoted(string)
            }
        }
    }

    package var fields: [(key: String, value: Value)]

    package init(_ fields: [(key: String, value: Value)]) {
        self.fields = fields
    }

    /// A flat JSON object as a row, its keys sorted (as the purchase export's lines print them).
    package init(sortedJSONObject line: String) throws {
        let object = try JSONDecoder().decode([String: Value].self, from: Data(line.utf8))
        fields = object.keys.sorted().map { ($0, object[$0]!) }
    }

    package static func == (left: ExportRow, right: ExportRow) -> Bool {
        left.fields.map(\.key) == right.fields.map(\.key) && left.fields.map(\.value) == right.fields.map(\.value)
    }

    package func hash(into hasher: inout Hasher) {
        for (key, value) in fields {
            hasher.combine(key)
            hasher.combine(value)
        }
    }

    /// The JSON object on one line, keys in order, `null` for absent values.
    package func jsonLine() throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        return "{"
            + (try fields.map { key, value in
                String(decoding: try encoder.encode(key), as: UTF8.self) + ":" + String(decoding: try encoder.encode(value), as: UTF8.self)
            }).joined(separator: ",") + "}"
    }

    /// The CSV header record, with its CRLF.
    package var csvHeader: String { fields.map { Self.quoted($0.key) }.joined(separator: ",") + "\r\n" }

    /// The CSV record, with its CRLF.
    package var csvRecord: String { fields.map(\.value.csvField).joined(separator: ",") + "\r\n" }

    static func quoted(_ text: String) -> String {
        guard text.contains(where: { $0 == "," || $0 == "\"" || $0 == "\r" || $0 == "\n" || $0 == "\r\n" }) else { return text }
        return "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}
