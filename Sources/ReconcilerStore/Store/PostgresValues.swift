public import AppStoreServer
import Foundation
public import NIOCore
// Public: `AppStoreEnvironment` is public, so its conformances are; no other module imports PostgresNIO.
public import PostgresNIO
package import ReconcilerShared

// The domain's values as PostgreSQL values, so that queries bind them and rows decode to them
// without a conversion at each call site. PostgresNIO lives only in the store, so the
// conformances do too.

/// An environment is stored as Apple spells it (`Production`, `Sandbox`) in a `text` column.
extension AppStoreEnvironment: PostgresNonThrowingEncodable, PostgresDecodable {
    public static var psqlType: PostgresDataType { String.psqlType }
    public static var psqlFormat: PostgresFormat { String.psqlFormat }

    public func encode<JSONEncoder: PostgresJSONEncoder>(into byteBuffer: inout ByteBuffer, context: PostgresEncodingContext<JSONEncoder>) {
        rawValue.encode(into: &byteBuffer, context: context)
    }

    public init<JSONDecoder: PostgresJSONDecoder>(
        from buffer: inout ByteBuffer, type: PostgresDataType, format: PostgresFormat, context: PostgresDecodingContext<JSONDecoder>
    ) throws {
        self.init(rawValue: try String(from: &buffer, type: type, format: format, context: context))
    }
}

/// An instant is bound as a `bigint` of UNIX milliseconds (the `_ms` columns), and read from
/// either such a `bigint` or a `timestamptz` (to the nearest millisecond).
extension Timestamp: PostgresNonThrowingEncodable, PostgresDecodable {
    package static var psqlType: PostgresDataType { Int64.psqlType }
    package static var psqlFormat: PostgresFormat { Int64.psqlFormat }

    package func encode<JSONEncoder: PostgresJSONEncoder>(into byteBuffer: inout ByteBuffer, context: PostgresEncodingContext<JSONEncoder>) {
        millisecondsSince1970.encode(into: &byteBuffer, context: context)
    }

    package init<JSONDecoder: PostgresJSONDecoder>(
        from buffer: inout ByteBuffer, type: PostgresDataType, format: PostgresFormat, context: PostgresDecodingContext<JSONDecoder>
    ) throws {
        switch type {
        case .timestamp, .timestamptz: self.init(try Date(from: &buffer, type: type, format: format, context: context))
        default: self.init(millisecondsSince1970: try Int64(from: &buffer, type: type, format: format, context: context))
        }
    }
}
