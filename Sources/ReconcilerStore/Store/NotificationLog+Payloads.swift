package import AppStoreServer
package import Foundation
import PostgresNIO
package import ReconcilerDomain

/// A signed value as a row stores it, rebuilt: what forwarding sends, `verify-stored` checks and
/// `compact-payloads` takes apart.
package enum StoredSignedValue: Sendable, Hashable {
    /// The JWS, byte for byte as it was received (rebuilt from its parts, or stored whole).
    case signed(String, form: PayloadForm)
    /// Removed by `prune --payloads-older-than`; the hash of what was stored stays.
    case pruned
    /// It cannot be put together: its parts name a header that is not stored, or a column it needs is
    /// empty (the database was changed by hand).
    case incomplete

    package var jws: String? {
        if case .signed(let jws, _) = self { jws } else { nil }
    }
}

extension NotificationLog {
    /// The columns of `notifications` (as `n`) that hold the signed payload; a read selects them
    /// and rebuilds the payload with ``storedPayload(_:header:)``.
    static let payloadColumns = """
        n.payload_form, n.payload_sha256, n.signed_payload, n.header_sha256, n.payload, n.signature,
        n.transaction_offset, n.transaction_signature, n.transaction_header_sha256, n.renewal_offset, n.renewal_signature,
        n.renewal_header_sha256
        """

    /// The header hashes a row that selected ``payloadColumns`` names.
    static func headerHashes(_ columns: NamedColumns) throws -> [[UInt8]] {
        try ["header_sha256", "transaction_header_sha256", "renewal_header_sha256"].compactMap { (try columns[$0] as Data?).map(Array.init) }
    }

    /// The signed payload of a row that selected ``payloadColumns``, rebuilt with the headers `header` finds.
    static func storedPayload(_ columns: NamedColumns, header: ([UInt8]) -> String?) throws -> StoredSignedValue {
        let form: PayloadForm = try columns.stored("payload_form", of: "notifications")
        switch form {
        case .legacy, .whole, .inNotification:
            guard let whole: String = try columns["signed_payload"] else { return .incomplete }
            return .signed(whole, form: form)
        case .pruned:
            return .pruned
        case .parts:
            guard let ownHash: Data = try columns["header_sha256"], let ownHeader = header(Array(ownHash)),
                let deflated: Data = try columns["payload"], let signature: Data = try columns["signature"]
            else { return .incomplete }
            // The nested values present, in the order their payloads are stored.
            var present: [(field: NotificationPayloadParts.Field, offset: Int, signature: Data, header: String, hash: [UInt8])] = []
            for (field, prefix) in [(NotificationPayloadParts.Field.signedTransactionInfo, "transaction_"), (.signedRenewalInfo, "renewal_")] {
                guard let offset: Int32 = try columns["\(prefix)offset"] else { continue }
                guard let signature: Data = try columns["\(prefix)signature"] else { return .incomplete }
                let nestedHash = (try columns["\(prefix)header_sha256"] as Data?).map(Array.init) ?? Array(ownHash)
                guard let nestedHeader = header(nestedHash) else { return .incomplete }
                present.append((field, Int(offset), signature, nestedHeader, nestedHash))
            }
            guard let payloads = StoredPayloads.inflate(Array(deflated), count: 1 + present.count) else { return .incomplete }
            let nested = present.enumerated().map { index, value in
                NotificationPayloadParts.Nested(
                    field: value.field, offset: value.offset,
                    parts: JWSParts(
                        encodedHeader: value.header, headerSHA256: value.hash, payload: payloads[index + 1], signature: Array(value.signature)))
            }
            let notification = JWSParts(
                encodedHeader: ownHeader, headerSHA256: Array(ownHash), payload: payloads[0], signature: Array(signature))
            return .signed(NotificationPayloadParts(notification: notification, nested: nested).compact, form: form)
        }
    }

    /// A transaction's parts from the columns `header_sha256`, `payload` (deflated) and `signature`.
    static func transactionParts(_ columns: NamedColumns, header: ([UInt8]) -> String?) throws -> JWSParts? {
        guard let hash: Data = try columns["header_sha256"], let encodedHeader = header(Array(hash)),
            let deflated: Data = try columns["payload"], let signature: Data = try columns["signature"],
            let payload = StoredPayloads.inflate(Array(deflated), count: 1)?.first
        else { return nil }
        return JWSParts(encodedHeader: encodedHeader, headerSHA256: Array(hash), payload: payload, signature: Array(signature))
    }
}

extension NotificationLog {
    /// A stored notification with its signed payload rebuilt, for `verify-stored`.
    package struct StoredNotification: Sendable {
        package var notificationUUID: String
        package var bundleId: String
        package var environment: AppStoreEnvironment
        package var notificationType: String
        package var subtype: String?
        package var signedDate: Int64
        package var receivedAt: Date
        package var form: PayloadForm
        /// SHA-256 of the JWS as it was stored (absent on rows from before migration 0015 not compacted yet).
        package var payloadSHA256: [UInt8]?
        package var value: StoredSignedValue
    }

    /// Up to `limit` notifications after `cursor` in UUID order (`""`: from the first), received at or
    /// after `since` when given, with their payloads rebuilt; the headers come from `headers`.
    package func storedNotifications(
        after cursor: String, receivedSince since: Date?, limit: Int, headers: HeaderBook, on transaction: DatabaseTransaction
    ) async throws -> [StoredNotification] {
        let rows = try await transaction.query(
            """
            SELECT n.notification_uuid, n.bundle_id, n.environment, n.notification_type, n.subtype, n.signed_date_ms, n.received_at,
                \(unescaped: Self.payloadColumns)
            FROM notifications n
            WHERE n.notification_uuid > \(cursor) AND (\(since)::timestamptz IS NULL OR n.received_at >= \(since))
            ORDER BY n.notification_uuid LIMIT \(limit)
            """, logger: logger)
        var read: [NamedColumns] = []
        for try await row in rows { read.append(NamedColumns(row)) }
        let known = try await headers.headers(try read.flatMap(Self.headerHashes), store: JWSHeaders(logger: logger), on: transaction)
        return try read.map { columns in
            StoredNotification(
                notificationUUID: try columns["notification_uuid"], bundleId: try columns["bundle_id"], environment: try columns["environment"],
                notificationType: try columns["notification_type"], subtype: try columns["subtype"], signedDate: try columns["signed_date_ms"],
                receivedAt: try columns["received_at"], form: try columns.stored("payload_form", of: "notifications"),
                payloadSHA256: (try columns["payload_sha256"] as Data?).map(Array.init),
                value: try Self.storedPayload(columns, header: { known[$0] }))
        }
    }

    /// The signed payloads of some notifications, rebuilt, by UUID (a transaction stored inside one is rebuilt from it).
    package func storedPayloads(
        _ uuids: some Collection<String>, headers: HeaderBook, on transaction: DatabaseTransaction
    ) async throws -> [String: StoredSignedValue] {
        guard !uuids.isEmpty else { return [:] }
        let rows = try await transaction.query(
            """
            SELECT n.notification_uuid, \(unescaped: Self.payloadColumns) FROM notifications n
            WHERE n.notification_uuid = ANY(\(Array(uuids))::text[])
            """, logger: logger)
        var read: [NamedColumns] = []
        for try await row in rows { read.append(NamedColumns(row)) }
        let known = try await headers.headers(try read.flatMap(Self.headerHashes), store: JWSHeaders(logger: logger), on: transaction)
        var payloads: [String: StoredSignedValue] = [:]
        for columns in read { payloads[try columns["notification_uuid"]] = try Self.storedPayload(columns, header: { known[$0] }) }
        return payloads
    }
}

extension NotificationLog {
    /// A notification stored whole before migration 0015 (``PayloadForm/legacy``).
    package struct LegacyPayload: Sendable {
        package var notificationUUID: String
        package var signedPayload: String
    }

    /// Up to `limit` legacy notifications after `cursor` in UUID order (`""`: from the first).
    package func legacyPayloads(after cursor: String, limit: Int, on transaction: DatabaseTransaction) async throws -> [LegacyPayload] {
        let rows = try await transaction.query(
            """
            SELECT notification_uuid, signed_payload FROM notifications
            WHERE notification_uuid > \(cursor) AND payload_form = 'legacy' AND signed_payload IS NOT NULL
            ORDER BY notification_uuid LIMIT \(limit)
            """, logger: logger)
        var payloads: [LegacyPayload] = []
        for try await (uuid, payload) in rows.decode((String, String).self) {
            payloads.append(LegacyPayload(notificationUUID: uuid, signedPayload: payload))
        }
        return payloads
    }

    /// Stores legacy notifications as new ones are stored: taken apart (`storage`), or whole when
    /// their parts would not rebuild them exactly. Only rows still legacy change (a compare-and-set,
    /// so it is safe beside writers and a second compaction). Returns how many changed, and how
    /// many of those stay whole.
    package func compact(
        _ payloads: [(payload: LegacyPayload, storage: NotificationStorage?)], on transaction: DatabaseTransaction
    ) async throws -> (changed: Int, whole: Int) {
        guard !payloads.isEmpty else { return (0, 0) }
        let rows = try PurchaseStore.json(
            payloads.map {
                PayloadColumns(notificationUUID: $0.payload.notificationUUID, signedPayload: $0.payload.signedPayload, storage: $0.storage)
            })
        let headers = try PurchaseStore.json(JWSHeaders.rows(for: payloads.flatMap { $0.storage?.parts.allParts ?? [] }))
        let names = PayloadColumns.names.split(separator: ",").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
        let result = try await transaction.query(
            """
            WITH headers AS (
                \(insertingHeaders: headers)
            )
            UPDATE notifications n SET (\(unescaped: names.joined(separator: ", "))) = (\(unescaped: names.map { "i.\($0)" }.joined(separator: ", ")))
            FROM jsonb_populate_recordset(NULL::notifications, \(rows)::jsonb) AS i
            WHERE n.notification_uuid = i.notification_uuid AND n.payload_form = 'legacy'
            RETURNING n.payload_form
            """, logger: logger)
        var (changed, whole) = (0, 0)
        for try await form in result.decode(String.self) {
            changed += 1
            if form == PayloadForm.whole.rawValue { whole += 1 }
        }
        return (changed, whole)
    }
}
