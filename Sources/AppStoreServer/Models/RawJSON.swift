import Foundation

/// A JSON value kept as Apple sent it, for objects this code does not model field by field (such
/// as `advancedCommerceInfo`): it decodes from any JSON and encodes back to the same JSON.
///
/// ```swift
/// if let info = transaction.advancedCommerceInfo { row["advanced_commerce_info"] = info.jsonString }
/// ```
public enum RawJSON: Codable, Hashable, Sendable {
    /// JSON `null`.
    case null
    /// A JSON Boolean.
    case bool(Bool)
    /// A JSON number without a fraction that fits in 64 bits.
    case integer(Int64)
    /// Any other JSON number.
    case number(Double)
    /// A JSON string.
    case string(String)
    /// A JSON array.
    case array([RawJSON])
    /// A JSON object.
    case object([String: RawJSON])

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .integer(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([RawJSON].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: RawJSON].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .integer(let value): try container.encode(value)
        case .number(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    /// The value as compact JSON with sorted keys (for a `jsonb` column or a log line).
    public var jsonString: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(self)).flatMap { String(data: $0, encoding: .utf8) } ?? "null"
    }

    /// The member `key` of an object; `nil` for a missing key or a value that is not an object.
    public subscript(key: String) -> RawJSON? {
        if case .object(let members) = self { members[key] } else { nil }
    }
}
