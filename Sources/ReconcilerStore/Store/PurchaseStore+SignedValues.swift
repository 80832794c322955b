package import AppStoreServer
package import Foundation
import PostgresNIO
import ReconcilerDomain

extension PurchaseStore {
    /// A row of `transactions` by its key.
    package struct TransactionKey: Sendable, Hashable, Comparable {
        package var bundleId: String
        package var environment: String
        package var transactionId: String

        package init(bundleId: String, environment: String, transactionId: String) {
            self.bundleId = bundleId
            self.environment = environment
            self.transactionId = transactionId
        }

        /// Before every key.
        package static let first = TransactionKey(bundleId: "", environment: "", transactionId: "")

        package static func < (lhs: TransactionKey, rhs: TransactionKey) -> Bool {
            (lhs.bundleId, lhs.environment, lhs.transactionId) < (rhs.bundleId, rhs.environment, rhs.transactionId)
        }
    }

    /// A stored transaction with its signed value rebuilt, for `verify-stored`.
    package struct StoredTransaction: Sendable {
        package var key: TransactionKey
        package var originalTransactionId: String
        package var signedDate: Int64
        package var updatedAt: Date
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
            SELECT t.bundle_id, t.environment, t.transaction_id, t.original_transaction_id, t.signed_date_ms, t.updated_at,
                t.payload_form, t.payload_sha256, t.signed_transaction_info, t.signed_in_notification, t.header_sha256, t.payload, t.signature
            FROM transactions t
            WHERE (t.bundle_id, t.environment, t.transaction_id) > (\(cursor.bundleId), \(cursor.environment), \(cursor.transactionId))
              AND (\(since)::timestamptz IS NULL OR t.updated_at >= \(since))
            ORDER BY t.bundle_id, t.environment, t.transaction_id LIMIT \(limit)
            """, logger: logger)
        var read: [NamedColumns] = []
        for try await row in rows { read.append(NamedColumns(row)) }
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
                    try NotificationLog.parts(columns, prefix: "", header: { known[$0] }).map { .signed($0.compact, form: form) } ?? .incomplete
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
