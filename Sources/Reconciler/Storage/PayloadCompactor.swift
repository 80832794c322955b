import AppStoreServer
import Foundation
import ReconcilerDomain
package import ReconcilerStore

/// `reconciler compact-payloads`: stores the signed values written before migration 0015
/// (``PayloadForm/legacy``, the whole JWS in a text column) the way new ones are stored: each
/// header once, the payloads deflated, a notification's nested values beside it, and a transaction
/// that a stored notification carries as a reference to it. Each value is rebuilt and compared
/// first; one that would not rebuild exactly stays whole.
///
/// It runs in batches of short transactions (each read, then written with a compare-and-set on
/// the row still being legacy), so it is safe beside `serve`, a run and a second compaction, and
/// it resumes where it stopped when it is run again: what is done stays done. Notifications go
/// first, so the transactions they carry can be found in them.
///
/// ```swift
/// let totals = try await PayloadCompactor(database: database).compact { print($0) }
/// ```
package struct PayloadCompactor: Sendable {
    /// What was compacted so far.
    package struct Totals: Sendable, Hashable, Codable {
        package var notifications = 0
        /// Of those, kept whole (their parts would not rebuild them exactly).
        package var notificationsWhole = 0
        package var transactions = 0
        /// Of those, now stored inside the notification that carried them.
        package var transactionsInNotification = 0
        package var transactionsWhole = 0

        package init() {}
    }

    let database: Database
    let batchSize: Int

    package init(database: Database, batchSize: Int = 500) {
        self.database = database
        self.batchSize = batchSize
    }

    package func compact(progress: @Sendable (Totals) -> Void = { _ in }) async throws -> Totals {
        var totals = Totals()
        let log = NotificationLog(logger: database.logger)
        var cursor = ""
        while true {
            let (after, limit) = (cursor, batchSize)
            let legacy = try await database.transaction { try await log.legacyPayloads(after: after, limit: limit, on: $0) }
            guard let last = legacy.last else { break }
            // Taken apart with no transaction open; verified when they were first stored.
            let compacted = legacy.map { ($0, NotificationStorage($0.signedPayload, nested: NotificationStorage.nestedValues(of: $0.signedPayload))) }
            try await database.storeHeaders(of: compacted.flatMap { $0.1?.parts.allParts ?? [] })
            let (changed, whole) = try await database.transaction { try await log.compact(compacted, on: $0) }
            (totals.notifications, totals.notificationsWhole) = (totals.notifications + changed, totals.notificationsWhole + whole)
            progress(totals)
            if legacy.count < batchSize { break }
            cursor = last.notificationUUID
        }
        let store = PurchaseStore(logger: database.logger)
        let headers = HeaderBook()
        var key = PurchaseStore.TransactionKey.first
        while true {
            let (after, limit) = (key, batchSize)
            let (legacy, carriers) = try await database.transaction { transaction in
                let legacy = try await store.legacyTransactions(after: after, limit: limit, on: transaction)
                return (legacy, try await store.notificationsCarrying(legacy.filter(\.fromNotification), headers: headers, on: transaction))
            }
            guard let last = legacy.last else { break }
            // A stored notification whose data.signedTransactionInfo is this very value holds it.
            let compacted = legacy.map { transaction in
                let carrier = (carriers[transaction.key] ?? []).first { _, payload in
                    payload.jws.flatMap { UnverifiedPayload.decode($0, as: ResponseBodyV2DecodedPayload.self)?.data?.signedTransactionInfo }
                        == transaction.signedValue
                }
                return (transaction, carrier?.uuid)
            }
            try await database.storeHeaders(of: compacted.filter { $0.1 == nil }.compactMap { JWSParts(exactly: $0.0.signedValue) })
            let changed = try await database.transaction { try await store.compact(compacted, on: $0) }
            totals.transactions += changed.values.reduce(0, +)
            totals.transactionsInNotification += changed[.inNotification] ?? 0
            totals.transactionsWhole += changed[.whole] ?? 0
            progress(totals)
            if legacy.count < batchSize { break }
            key = last.key
        }
        return totals
    }
}
