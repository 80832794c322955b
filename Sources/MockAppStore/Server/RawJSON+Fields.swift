import AppStoreServer

/// Reading request bodies field by field as the App Store does (a date sent as a string is an
/// invalid date, not a decoding failure of the whole body).
extension RawJSON {
    var integer: Int64? { if case .integer(let value) = self { value } else { nil } }
    var string: String? { if case .string(let value) = self { value } else { nil } }
    var bool: Bool? { if case .bool(let value) = self { value } else { nil } }
}
