package import AppStoreServer
import Foundation
package import ReconcilerDomain
package import ReconcilerShared
import ReconcilerStore

/// A signed transaction the app hands over (StoreKit's `Transaction.jwsRepresentation`, posted to
/// the app API's `POST /v1/transactions`): verified as a notification's transaction is (the chain
/// to the pinned roots, the signature), routed by its signed `bundleId` and `environment` to the
/// configured app, and applied as a snapshot through the one write path (a newer stored state is
/// never regressed), with a change-feed row of source `app`.
///
/// ```swift
/// let handedOver = try await HandedOverTransaction.verify(jws, handlers: handlers)
/// let purchase = try await handedOver.apply()
/// ```
package struct HandedOverTransaction: Sendable {
    /// The handler of the app and environment the transaction names.
    package let handler: NotificationHandler
    package let transaction: Verified<JWSTransactionDecodedPayload>

    /// Verifies `signedTransaction` and finds its app: a forgery or a malformed value throws the
    /// verifier's ``VerificationError`` (400), an app or environment no handler serves
    /// ``ReconcilerError/Code/appNotConfigured`` (503). Nothing is written.
    package static func verify(_ signedTransaction: String, handlers: [NotificationHandler]) async throws -> HandedOverTransaction {
        guard let any = handlers.first else { throw ReconcilerError(.appNotConfigured, "this deployment serves no app") }
        // The signature and chain first (every handler's verifier trusts the same roots): only then
        // is the app it names believed.
        let json = try await any.verifier.verifySignatureAndDecodePayload(signedTransaction)
        let named = try? JSONDecoder().decode(JWSTransactionDecodedPayload.self, from: Data(json))
        guard let bundleId = named?.bundleId, let environment = named?.environment else {
            throw ReconcilerError(.invalidQuery, "the signed transaction names no bundleId or environment")
        }
        guard let handler = handlers.first(where: { $0.scope.target.bundleId == bundleId && $0.scope.target.environment == environment }) else {
            throw ReconcilerError(
                .appNotConfigured, "\(AppTarget(bundleId: bundleId, environment: environment).description) is not configured in this deployment")
        }
        let transaction = try await handler.verifier.verifyTransaction(signedTransaction)
        guard transaction.payload.originalTransactionId != nil, transaction.payload.transactionId != nil else {
            throw ReconcilerError(.invalidQuery, "the signed transaction has no transactionId or originalTransactionId")
        }
        return HandedOverTransaction(handler: handler, transaction: transaction)
    }

    /// Applies it in one short transaction and returns its purchase as stored afterwards
    /// (`entitled` as of `now`; `fresh`: the app's own signed value, not Apple's answer).
    package func apply(at now: Timestamp = .now) async throws -> AppPurchase {
        let (store, database, transaction) = (handler.store, handler.database, self.transaction)
        let original = transaction.payload.originalTransactionId ?? ""
        try await database.storeHeaders(of: [JWSParts(exactly: transaction.signedValue)].compactMap { $0 })
        let purchases = try await database.transaction { dbTransaction in
            try await store.lock(purchases: [original], on: dbTransaction)
            let before = try await store.purchaseStates([original], on: dbTransaction)
            _ = try await store.write(
                transactions: [PurchaseStore.TransactionWrite(transaction)], updates: [PurchaseStore.PurchaseUpdate(originalTransactionId: original)],
                before: before, origin: .init(source: .app), on: dbTransaction)
            return try await store.checkedPurchases([original], at: now, on: dbTransaction)
        }
        guard let purchase = purchases.first else { throw ReconcilerError(.missingRow, "the purchase just written was not there") }
        return AppPurchase(state: purchase.state, checkedAt: purchase.checkedAt, fresh: false)
    }
}
