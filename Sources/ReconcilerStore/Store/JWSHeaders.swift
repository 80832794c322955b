package import AppStoreServer
import Foundation
package import Logging
import PostgresNIO
import Synchronization

/// How a row of `notifications` or `transactions` holds its signed value (`payload_form`).
package enum PayloadForm: String, Sendable, Hashable, CaseIterable {
    /// The whole JWS, as written before migration 0015; `reconciler compact-payloads` takes it apart.
    case legacy
    /// The whole JWS: its parts would not rebuild it byte for byte (counted by `verify-stored`).
    case whole
    /// The header's hash, the payload's bytes and the signature's (a notification's nested values too).
    case parts
    /// A transaction whose version is the `data.signedTransactionInfo` of a stored notification.
    case inNotification = "in_notification"
    /// Removed by `reconciler prune --payloads-older-than`: the decoded columns and the hash stay.
    case pruned
}

/// The SQL of `jws_headers`: each distinct JWS protected header (`alg` and the `x5c` certificate
/// chain, about 4.4 KB on Apple's values) that a stored signed value names, once, by the SHA-256
/// of the header segment. One signing certificate signs every App Store value for about two years,
/// so this table holds a handful of rows; the values keep the 32-byte hash. Headers are never
/// deleted, so a header once read can be remembered (``HeaderBook``); but the database itself can
/// lose one a process saw stored (a restore, a failover to a replica behind), so a statement that
/// records values checks the headers it does not send (``missingSQL(parameter:)``).
///
/// ```swift
/// let rows = JWSHeaders.rows(for: [parts.notification, parts.nested[0].parts])   // written with the values
/// let headers = try await JWSHeaders(logger: logger).headers([hash], on: transaction)
/// ```
package struct JWSHeaders: Sendable {
    package let logger: Logger

    package init(logger: Logger) {
        self.logger = logger
    }

    /// One row of `jws_headers`; the keys are its column names (bytea as `\x` hex). Without its
    /// header, a header the process knows stored: only checked (``missingSQL(parameter:)``).
    struct HeaderColumns: Encodable, Hashable {
        var sha256: String
        var encoded_header: String?
    }

    /// The distinct header rows of some values, sorted by hash (the order every writer inserts in,
    /// so two transactions inserting the same new headers wait for each other rather than deadlock).
    static func rows(for values: some Sequence<JWSParts>) -> [HeaderColumns] {
        // By hash: hashing a 4.4 KB header for a set costs more than the 32 bytes of its SHA-256.
        var seen = Set<[UInt8]>()
        var rows: [HeaderColumns] = []
        for value in values where seen.insert(value.headerSHA256).inserted {
            rows.append(HeaderColumns(sha256: Bytea.hex(value.headerSHA256), encoded_header: value.encodedHeader))
        }
        return rows.sorted { $0.sha256 < $1.sha256 }
    }

    /// The header rows of some values for a statement that records them: the header of each one
    /// not known to be stored, only the hash of each one `stored` knows (the statement checks that
    /// those are still there: ``missingSQL(parameter:)``).
    static func rows(for values: [JWSParts], knowing stored: StoredHeaders?) -> [HeaderColumns] {
        guard let stored else { return rows(for: values) }
        let unknown = stored.unknown(values)
        let sent = Set(unknown.map(\.headerSHA256))
        let checked = Set(values.map(\.headerSHA256)).subtracting(sent).map { HeaderColumns(sha256: Bytea.hex($0), encoded_header: nil) }
        return (rows(for: unknown) + checked).sorted { $0.sha256 < $1.sha256 }
    }

    /// The statement (for a `WITH` list) that stores the headers of `$parameter` (a JSON array of
    /// ``HeaderColumns``) that are not stored yet.
    static func insertSQL(parameter: String) -> String {
        """
        INSERT INTO jws_headers (sha256, encoded_header)
            SELECT sha256, encoded_header FROM jsonb_populate_recordset(NULL::jws_headers, \(parameter)::jsonb)
            WHERE encoded_header IS NOT NULL ORDER BY sha256
            ON CONFLICT (sha256) DO NOTHING
        """
    }

    /// The statement (for a `WITH` list) that selects, in hex as `sha256`, the hashes `$parameter`
    /// sends without their header (known stored) that `jws_headers` does not hold: the caller
    /// stores them again (``restore(_:of:stored:on:)``). One index probe per distinct header.
    static func missingSQL(parameter: String) -> String {
        """
        SELECT encode(h.sha256, 'hex') AS sha256 FROM jsonb_populate_recordset(NULL::jws_headers, \(parameter)::jsonb) h
        WHERE h.encoded_header IS NULL AND NOT EXISTS (SELECT 1 FROM jws_headers s WHERE s.sha256 = h.sha256)
        """
    }

    /// Stores in `transaction` the headers of `values` whose hashes (`missing`, in hex) a statement
    /// that recorded them found gone although this process had seen them stored (the database was
    /// restored from a backup or failed over to a replica that had not received them), and forgets
    /// them in `stored`, so the next ``Database/storeHeaders(of:)`` commits them again too.
    func restore(_ missing: [String], of values: [JWSParts], stored: StoredHeaders?, on transaction: DatabaseTransaction) async throws {
        guard !missing.isEmpty else { return }
        let wanted = Set(missing)
        let lost = values.filter { wanted.contains(Bytea.plainHex($0.headerSHA256)) }
        stored?.forget(lost.map(\.headerSHA256))
        logger.warning(
            "JWS headers this process had seen stored are gone from jws_headers (a restore or a failover?): stored again",
            metadata: ["sha256": "\(missing.sorted())"])
        try await transaction.query("\(insertingHeaders: try PurchaseStore.json(Self.rows(for: lost)))", logger: logger)
    }

    /// The stored headers of these hashes, by hash.
    package func headers(_ hashes: some Collection<[UInt8]>, on transaction: DatabaseTransaction) async throws -> [[UInt8]: String] {
        guard !hashes.isEmpty else { return [:] }
        let rows = try await transaction.query(
            """
            SELECT sha256, encoded_header FROM jws_headers
            WHERE sha256 = ANY(ARRAY(SELECT decode(h, 'hex') FROM unnest(\(hashes.map(Bytea.plainHex))::text[]) AS h))
            """, logger: logger)
        var headers: [[UInt8]: String] = [:]
        for try await (hash, header) in rows.decode((Data, String).self) { headers[Array(hash)] = header }
        return headers
    }

    /// How many headers are stored.
    package func count(on transaction: DatabaseTransaction) async throws -> Int {
        let rows = try await transaction.query("SELECT count(*) FROM jws_headers", logger: logger)
        for try await count in rows.decode(Int.self) { return count }
        return 0
    }
}

/// The headers one process has seen committed in `jws_headers`: a value signed with a known header
/// needs no header sent. The reconciler never deletes a header, but the database can lose one (a
/// restore, a failover), so what is known is not taken on trust: a statement that records values
/// checks the known headers it names (``JWSHeaders/missingSQL(parameter:)``) and stores again, and
/// forgets here, any that is gone.
final class StoredHeaders: Sendable {
    private let known = Mutex<Set<[UInt8]>>([])

    init() {}

    /// The values whose headers are not known to be stored, each header once.
    func unknown(_ values: some Sequence<JWSParts>) -> [JWSParts] {
        known.withLock { known in
            var seen = Set<[UInt8]>()
            return values.filter { !known.contains($0.headerSHA256) && seen.insert($0.headerSHA256).inserted }
        }
    }

    func insert(_ hashes: some Sequence<[UInt8]>) {
        known.withLock { $0.formUnion(hashes) }
    }

    func forget(_ hashes: some Sequence<[UInt8]>) {
        known.withLock { $0.subtract(hashes) }
    }
}

extension Database {
    /// Commits the headers of `values` that this process has not seen stored, in a short
    /// transaction of their own; call it before the transaction that records the values. The
    /// statements that record values store their headers too, so nothing is lost when a caller does
    /// not, but a header first inserted there makes every concurrent transaction recording the same
    /// header wait for that one to commit, with whatever locks it holds meanwhile.
    package func storeHeaders(of values: some Sequence<JWSParts>) async throws {
        let unknown = storedHeaders.unknown(values)
        guard !unknown.isEmpty else { return }
        let rows = try PurchaseStore.json(JWSHeaders.rows(for: unknown))
        try await transaction { [logger] transaction in
            try await transaction.query("\(insertingHeaders: rows)", logger: logger)
        }
        storedHeaders.insert(unknown.map(\.headerSHA256))
    }
}

/// Headers read from `jws_headers`, remembered by hash (a stored header never changes), so a
/// command that rebuilds millions of values reads each header once.
package final class HeaderBook: Sendable {
    private let known = Mutex<[[UInt8]: String]>([:])

    package init() {}

    /// The headers of `hashes`, reading the ones not known yet.
    package func headers(
        _ hashes: some Sequence<[UInt8]>, store: JWSHeaders, on transaction: DatabaseTransaction
    ) async throws -> [[UInt8]: String] {
        let wanted = Set(hashes)
        let missing = known.withLock { known in wanted.filter { known[$0] == nil } }
        if !missing.isEmpty {
            let read = try await store.headers(missing, on: transaction)
            known.withLock { $0.merge(read) { old, _ in old } }
        }
        return known.withLock { known in known.filter { wanted.contains($0.key) } }
    }
}

extension PostgresQuery.StringInterpolation {
    /// ``JWSHeaders/insertSQL(parameter:)`` with `rows` (a JSON array of ``JWSHeaders/HeaderColumns``)
    /// bound in place, for a statement built by interpolation.
    mutating func appendInterpolation(insertingHeaders rows: String) {
        let sql = JWSHeaders.insertSQL(parameter: "\u{1}")
        let parts = sql.components(separatedBy: "\u{1}")
        appendLiteral(parts[0])
        appendInterpolation(rows)
        appendLiteral(parts[1])
    }
}

/// bytea values in the JSON that `jsonb_populate_recordset` reads: PostgreSQL's hex input form.
enum Bytea {
    private static let digits = Array("0123456789abcdef".utf8)

    /// `\x` and two hex digits per byte.
    static func hex(_ bytes: some Collection<UInt8>) -> String {
        "\\x" + plainHex(bytes)
    }

    /// Two hex digits per byte (`decode(text, 'hex')`, and how the quarantine names payloads).
    static func plainHex(_ bytes: some Collection<UInt8>) -> String {
        var text = [UInt8]()
        text.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}
