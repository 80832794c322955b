package import AppStoreServer
import Foundation
package import ReconcilerDomain
package import ReconcilerStore

/// Acks of consumption requests (`reconciler consumption ack`): a request that needs nothing more
/// from the reconciler, because the app answered it itself or it is deliberately not answered
/// (the customer did not consent). An acked request is no longer open: `consumption list --open`,
/// the gauges and the alert leave it out. The first ack of a request is kept.
///
/// ```swift
/// let acked = try await ConsumptionAcks.ack(transactionId: "2000000100000212", apps: nil, by: "alice", note: "answered by the app", database: database)
/// print(acked.newlyAcked.isEmpty ? "already acked" : "acked")
/// ```
package enum ConsumptionAcks {
    /// The longest `--by`, in characters.
    package static let maximumByLength = 200
    /// The longest `--note`, in characters.
    package static let maximumNoteLength = 2000

    /// The requests of one transaction after an ack.
    package struct Outcome: Sendable {
        /// Their app and environment.
        package var target: AppTarget
        /// Every stored request for the transaction there, newest first, as stored after the ack.
        package var requests: [ConsumptionRequests.Request]
        /// The notification UUIDs this ack acked (the others were acked before: their first ack is kept).
        package var newlyAcked: Set<String>
    }

    /// Acks every stored request for `transactionId` in `apps` (`nil`: every app and environment
    /// stored), which must be of one app and environment, in one short transaction.
    /// - Throws: ``ReconcilerError/Code/invalidAnswer`` for a malformed transaction ID,
    ///   ``ReconcilerError/Code/invalidInput`` for an empty or long `by` or a long `note`, or
    ///   requests in several apps; ``ReconcilerError/Code/unknownConsumptionRequest`` for none.
    ///   Nothing is written then.
    package static func ack(transactionId: String, apps: [AppTarget]?, by: String, note: String?, database: Database) async throws -> Outcome {
        try ConsumptionAnswers.checkTransactionId(transactionId)
        let by = by.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !by.isEmpty, by.count <= maximumByLength else {
            throw ReconcilerError.configuration("--by must name who acks it, in at most \(maximumByLength) characters")
        }
        let note = note.map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }.flatMap { $0.isEmpty ? nil : $0 }
        if let note, note.count > maximumNoteLength {
            throw ReconcilerError.configuration("--note is longer than \(maximumNoteLength) characters")
        }
        return try await database.transaction { [logger = database.logger] transaction in
            let store = ConsumptionRequests(logger: logger)
            let found = try await ConsumptionAnswers.requests(forTransaction: transactionId, apps: apps, on: transaction, logger: logger)
            let acked = try await store.ack(found, transactionId: transactionId, by: by, note: note, on: transaction)
            let target = found[0].app
            let after = try await store.requests(forTransaction: transactionId, apps: [target], on: transaction)
            return Outcome(target: target, requests: after, newlyAcked: acked)
        }
    }
}
