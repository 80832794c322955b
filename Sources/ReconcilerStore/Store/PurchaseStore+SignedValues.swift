package import AppStoreServer
package import Foundation
import PostgresNIO
import ReconcilerDomain

extension PurchaseStore {
    /// A row of `transactions` by its key.
    package struct TransactionKey: Sendable, Hashable, Comparable {
        package var bundleId: String
        package var environment: AppStoreEnvironment
        package var transactionId: String

        package init(bundleId: String, environment: AppStoreEnvironment, transactionId: String) {
            self.bundleId = bundleId
            self.environment = environment
            self.transactionId = transactionId
        }

        /// Before every key.
        package static let first = TransactionKey(bundleId: "", environment: AppStoreEnvironment(rawValue: ""), transactionId: "")

        package static func < (lhs: TransactionKey, rhs: TransactionKey) -> Bool {
            (lhs.bundleId, lhs.environment.rawValue, lhs.transactionId) < (rhs.bundleId, rhs.environment.rawValue, rhs.transactionId)
        }
    }

    /// A stored transaction with its signed value rebuilt, for `verify-stored`.
    package struct StoredTransaction: Sendable {
        package var key: TransactionKey
        package var originalTransactionId: String
        package var signedDate: Int64
        var updatedAt: Date
        package var form: PayloadForm
        package var payloadSHA256: [UInt8]?
        /// For ``PayloadForm/inNotification``: the notification it was rebuilt from.
        package var signedInNotification: String?
        package var value: StoredSignedValue
    }

    /// Up to `limit` transactions after `cursor` in key order, written at or after `since` when
    /// given, with their signed values rebuilt (one stored inside a notification from that notification).
    package func storedTransactions(
        after cursor: TransactionKey, updatedSince since: Date?, limit: Int, headers: HeaderBook, on transaction: DatabaseTransaction
    ) async throws -> [StoredTransaction] {
        let rows = try await transaction.query(
            """
            SELECT \(unescaped: Self.storedTransactionColumns) FROM transactions t
            WHERE (t.bundle_id, t.environment, t.transaction_id) > (\(cursor.bundleId), \(cursor.environment), \(cursor.transactionId))
              AND (\(since)::timestamptz IS NULL OR t.updated_at >= \(since))
            ORDER BY t.bundle_id, t.environment, t.transaction_id LIMIT \(limit)
            """, logger: logger)
        var read: [NamedColumns] = []
        for try await row in rows { read.append(NamedColumns(row)) }
        return try await rebuild(read, headers: headers, on: transaction)
    }

    /// The stored versions of a transaction ID, in every app and environment that has it, rebuilt.
    package func storedTransactions(
        transactionId: String, headers: HeaderBook, on transaction: DatabaseTransaction
    ) async throws
        -> [StoredTransaction]
    {
        let rows = try await transaction.query(
            "SELECT \(unescaped: Self.storedTransactionColumns) FROM transactions t WHERE t.transaction_id = \(transactionId)", logger: logger)
        var read: [NamedColumns] = []
        for try await row in rows { read.append(NamedColumns(row)) }
        return try await rebuild(read, headers: headers, on: transaction)
    }

    private static let storedTransactionColumns = """
        t.bundle_id, t.environment, t.transaction_id, t.original_transaction_id, t.signed_date_ms, t.updated_at,
        t.payload_form, t.payload_sha256, t.signed_transaction_info, t.signed_in_notification, t.header_sha256, t.payload, t.signature
        """

    private func rebuild(_ read: [NamedColumns], headers: HeaderBook, on transaction: DatabaseTransaction) async throws -> [StoredTransaction] {
        let known = try await headers.headers(
            try read.compactMap { (try $0["header_sha256"] as Data?).map(Array.init) }, store: JWSHeaders(logger: logger), on: transaction)
        let notificationUUIDs = Set(try read.compactMap { try $0["signed_in_notification"] as String? })
        let notifications = try await self.notifications.storedPayloads(notificationUUIDs, headers: headers, on: transaction)
        return try read.map { columns in
            let form: PayloadForm = try columns.stored("payload_form", of: "transactions")
            let uuid: String? = try columns["signed_in_notification"]
            let value: StoredSignedValue
            switch form {
            case .legacy, .whole:
                let whole: String? = try columns["signed_transaction_info"]
                value = whole.map { .signed($0, form: form) } ?? .incomplete
            case .parts:
                value =
                    try NotificationLog.transactionParts(columns, header: { known[$0] }).map { .signed($0.compact, form: form) } ?? .incomplete
            case .inNotification:
                switch uuid.flatMap({ notifications[$0] }) {
                case .signed(let jws, _):
                    let nested = UnverifiedPayload.decode(jws, as: ResponseBodyV2DecodedPayload.self)?.data?.signedTransactionInfo
                    value = nested.map { .signed($0, form: form) } ?? .incomplete
                case .pruned: value = .pruned
                case .incomplete, nil: value = .incomplete
                }
            case .pruned:
                value = .pruned
            }
            return StoredTransaction(
                key: TransactionKey(
                    bundleId: try columns["bundle_id"], environment: try columns["environment"], transactionId: try columns["transaction_id"]),
                originalTransactionId: try columns["original_transaction_id"], signedDate: try columns["signed_date_ms"],
                updatedAt: try columns["updated_at"], form: form, payloadSHA256: (try columns["payload_sha256"] as Data?).map(Array.init),
                signedInNotification: uuid, value: value)
        }
    }
}

extension PurchaseStore {
    /// A transaction stored whole before migration 0015 (``PayloadForm/legacy``).
    package struct LegacyTransaction: Sendable {
        package var key: TransactionKey
        package var originalTransactionId: String
        package var signedValue: String
        /// The version came inside a notification: that notification may hold it.
        package var fromNotification: Bool
    }

    /// Up to `limit` legacy transactions after `cursor` in key order.
    package func legacyTransactions(
        after cursor: TransactionKey, limit: Int, on transaction: DatabaseTransaction
    ) async throws
        -> [LegacyTransaction]
    {
        let rows = try await transaction.query(
            """
            SELECT bundle_id, environment, transaction_id, original_transaction_id, signed_transaction_info, from_notification FROM transactions
            WHERE (bundle_id, environment, transaction_id) > (\(cursor.bundleId), \(cursor.environment), \(cursor.transactionId))
              AND payload_form = 'legacy' AND signed_transaction_info IS NOT NULL
            ORDER BY bundle_id, environment, transaction_id LIMIT \(limit)
            """, logger: logger)
        var legacy: [LegacyTransaction] = []
        for try await (bundleId, environment, transactionId, original, signed, fromNotification) in rows.decode(
            (String, AppStoreEnvironment, String, String, String, Bool).self)
        {
            legacy.append(
                LegacyTransaction(
                    key: TransactionKey(bundleId: bundleId, environment: environment, transactionId: transactionId),
                    originalTransactionId: original, signedValue: signed, fromNotification: fromNotification))
        }
        return legacy
    }

    /// The notifications of the same app that carry each of these transactions (by its transaction
    /// ID), and their signed payloads rebuilt: where a legacy transaction may be stored already.
    package func notificationsCarrying(
        _ transactions: [LegacyTransaction], headers: HeaderBook, on transaction: DatabaseTransaction
    ) async throws -> [TransactionKey: [(uuid: String, payload: StoredSignedValue)]] {
        guard !transactions.isEmpty else { return [:] }
        struct Wanted: Encodable {
            var bundle_id: String
            var environment: String
            var transaction_id: String
            var original_transaction_id: String
        }
        let wanted = try Self.json(
            transactions.map {
                Wanted(
                    bundle_id: $0.key.bundleId, environment: $0.key.environment.rawValue, transaction_id: $0.key.transactionId,
                    original_transaction_id: $0.originalTransactionId)
            })
        let rows = try await transaction.query(
            """
            SELECT n.notification_uuid, n.bundle_id, n.environment, n.transaction_id
            FROM jsonb_to_recordset(\(wanted)::jsonb) AS w (bundle_id text, environment text, transaction_id text, original_transaction_id text)
            JOIN notifications n ON n.original_transaction_id = w.original_transaction_id AND n.transaction_id = w.transaction_id
                AND n.bundle_id = w.bundle_id AND n.environment = w.environment
            """, logger: logger)
        var carriers: [TransactionKey: [String]] = [:]
        for try await (uuid, bundleId, environment, transactionId) in rows.decode((String, String, AppStoreEnvironment, String).self) {
            carriers[TransactionKey(bundleId: bundleId, environment: environment, transactionId: transactionId), default: []].append(uuid)
        }
        let payloads = try await notifications.storedPayloads(Set(carriers.values.joined()), headers: headers, on: transaction)
        return carriers.mapValues { uuids in uuids.sorted().compactMap { uuid in payloads[uuid].map { (uuid, $0) } } }
    }

    /// Stores legacy transactions as new ones are stored: inside the notification that holds the
    /// same signed value (`signedInNotification`), else taken apart, else whole. Only rows still
    /// legacy change (a compare-and-set). Returns how many changed, by the form they now have.
    package func compact(
        _ transactions: [(legacy: LegacyTransaction, signedInNotification: String?)], on transaction: DatabaseTransaction
    ) async throws -> [PayloadForm: Int] {
        guard !transactions.isEmpty else { return [:] }
        struct Row: Encodable {
            var bundle_id: String
            var environment: String
            var transaction_id: String
            var stored: StoredTransactionPayload

            func encode(to encoder: any Encoder) throws {
                var container = encoder.container(keyedBy: CodingKeys.self)
                try container.encode(bundle_id, forKey: .bundle_id)
                try container.encode(environment, forKey: .environment)
                try container.encode(transaction_id, forKey: .transaction_id)
                try stored.encode(to: encoder)
            }

            enum CodingKeys: String, CodingKey { case bundle_id, environment, transaction_id }
        }
        let rows = transactions.map {
            Row(
                bundle_id: $0.legacy.key.bundleId, environment: $0.legacy.key.environment.rawValue, transaction_id: $0.legacy.key.transactionId,
                stored: StoredTransactionPayload($0.legacy.signedValue, signedInNotification: $0.signedInNotification))
        }
        let names = StoredTransactionPayload.names
        let result = try await transaction.query(
            """
            WITH headers AS (
                \(insertingHeaders: try Self.json(JWSHeaders.rows(for: rows.compactMap(\.stored.parts))))
            )
            UPDATE transactions t SET (\(unescaped: names.joined(separator: ", "))) = (\(unescaped: names.map { "i.\($0)" }.joined(separator: ", ")))
            FROM jsonb_populate_recordset(NULL::transactions, \(try Self.json(rows))::jsonb) AS i
            WHERE (t.bundle_id, t.environment, t.transaction_id) = (i.bundle_id, i.environment, i.transaction_id) AND t.payload_form = 'legacy'
            RETURNING t.payload_form
            """, logger: logger)
        var changed: [PayloadForm: Int] = [:]
        for try await form in result.decode(String.self) {
            changed[try ReconcilerError.stored(form, in: "transactions.payload_form"), default: 0] += 1
        }
        return changed
    }
}
