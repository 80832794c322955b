import PostgresNIO
import ReconcilerDomain
import ReconcilerShared

/// One row read by column name, so a struct's fields are matched to a SELECT's columns by name and
/// never lined up by position (a column added to the SELECT cannot shift the others).
///
/// ```swift
/// for try await row in try await transaction.query("SELECT run_id, status FROM reconcile_runs", logger: logger) {
///     let columns = NamedColumns(row)
///     let runId: Int64 = try columns["run_id"]
/// }
/// ```
struct NamedColumns {
    private let row: PostgresRandomAccessRow

    init(_ row: PostgresRow) {
        self.row = row.makeRandomAccess()
    }

    subscript<Value: PostgresDecodable>(_ column: String) -> Value {
        get throws { try row[column].decode(Value.self) }
    }

    /// A state the reconciler itself stored in `column` (``ReconcilerError/stored(_:in:as:)``).
    func stored<State: RawRepresentable>(_ column: String, of table: String, as state: State.Type = State.self) throws -> State
    where State.RawValue == String {
        try ReconcilerError.stored(try self[column] as String, in: "\(table).\(column)")
    }

    /// ``stored(_:of:as:)`` of a column that may be NULL.
    func storedIfPresent<State: RawRepresentable>(_ column: String, of table: String, as state: State.Type = State.self) throws -> State?
    where State.RawValue == String {
        try (self[column] as String?).map { try ReconcilerError.stored($0, in: "\(table).\(column)") }
    }
}
