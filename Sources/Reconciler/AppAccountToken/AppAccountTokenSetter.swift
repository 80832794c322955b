package import AppStoreServer
import Foundation
package import ReconcilerDomain
package import ReconcilerShared
package import ReconcilerStore

/// `reconciler set-app-account-token`: sets the `appAccountToken` of one purchase at Apple (Set
/// App Account Token), then reads the customer again as `repair` does, so `export` shows the
/// token Apple now returns.
///
/// 1. Checks before anything is asked of Apple: the token is a UUID, the ID is digits, and for an
///    ID the store knows, that it is the purchase's original transaction ID and that the purchase
///    was not shared through Family Sharing (Apple keeps no token for those).
/// 2. Calls Set App Account Token out of the app's shared budget; Apple's 4xx errors are shown
///    with their code and name (exit 1), a 429 or 5xx the client gave up on is retryable (exit 2).
/// 3. Reads the customer again through ``CustomerRepair`` (transaction history from the start,
///    since Apple does not say whether the call moves its `revision`), and says whether the stored
///    purchase now carries the token.
///
/// ```swift
/// let (id, token) = try AppAccountTokenSetter.parse(originalTransactionId: "2000000100000317", appAccountToken: uuid)
/// let outcome = try await AppAccountTokenSetter(scope: target.scope, database: database, verifier: verifier, client: client)
///     .set(originalTransactionId: id, appAccountToken: token)
/// print(outcome.humanSummary())
/// ```
package struct AppAccountTokenSetter: Sendable {
    /// What the command did.
    package struct Outcome: Sendable {
        package var originalTransactionId: String
        package var appAccountToken: String
        package var environment: AppStoreEnvironment
        /// The read after the call (a run of kind `repair`).
        package var reread: RepairReport
        /// The purchase's stored `appAccountToken` after that read.
        package var stored: String?
        /// Whether Apple's answer to that read carried the token.
        package var shown: Bool { stored?.lowercased() == appAccountToken.lowercased() }

        package func humanSummary() -> String {
            var lines = ["set: Apple accepted app account token \(appAccountToken) for purchase \(originalTransactionId) (\(environment))"]
            if shown {
                lines.append("read again (run \(reread.runId)): the purchase carries it; `export` shows it")
            } else {
                lines.append(
                    "read again (run \(reread.runId)): Apple's answer does not show it yet (stored: \(stored ?? "none")); "
                        + "the next read of this customer (a run, `repair`) will")
            }
            return lines.joined(separator: "\n")
        }
    }

    let scope: AppScope
    let database: Database
    let verifier: SignedDataVerifier
    let client: AppStoreServerAPIClient
    let store: PurchaseStore

    package init(scope: AppScope, database: Database, verifier: SignedDataVerifier, client: AppStoreServerAPIClient) {
        self.scope = scope
        self.database = database
        self.verifier = verifier
        self.client = client
        self.store = PurchaseStore(database: database, scope: scope)
    }

    /// The original transaction ID (digits) and the token (a UUID, lowercased), checked for their
    /// form before anything is asked of Apple.
    /// - Throws: ``ReconcilerError/Code/malformedSelector`` (exit 1).
    package static func parse(originalTransactionId: String, appAccountToken: String) throws -> (id: String, token: String) {
        guard let id = CustomerRepair.Selector.transactionId(originalTransactionId) else {
            throw ReconcilerError(
                .malformedSelector,
                "--original-transaction-id: \(CustomerRepair.Selector.quoted(originalTransactionId)) is not a transaction ID (digits, e.g. 2000000123456789)"
            )
        }
        let text = appAccountToken.trimmingCharacters(in: .whitespaces)
        guard let uuid = UUID(uuidString: text) else {
            throw ReconcilerError(
                .malformedSelector,
                "--app-account-token: \(CustomerRepair.Selector.quoted(text)) is not a UUID (e.g. 7e3fb20b-4cdb-47cc-936d-99d65f608138); nothing was sent"
            )
        }
        return (id, uuid.uuidString.lowercased())
    }

    /// Checks the ID against the store, sets the token at Apple, reads the customer again.
    /// - Throws: ``ReconcilerError/Code/malformedSelector`` for an ID the store knows as a later
    ///   transaction or a Family Sharing purchase (nothing sent); ``ReconcilerError/Code/unknownTransactionId``
    ///   for 4040005; ``ReconcilerError/Code/appleRefused`` for Apple's other 4xx (exit 1);
    ///   ``ReconcilerError/Code/notRecovered`` for a 429 or 5xx (exit 2).
    package func set(originalTransactionId id: String, appAccountToken token: String) async throws -> Outcome {
        try await check(id)
        do {
            try await client.setAppAccountToken(originalTransactionId: id, UpdateAppAccountTokenRequest(appAccountToken: token))
        } catch let error as AppStoreServerAPIError {
            throw Self.failure(error, originalTransactionId: id)
        }
        let repair = CustomerRepair(
            configuration: .init(selector: .transactionId(id), since: Timestamp(Date()) - .seconds(300), fullHistory: true),
            scope: scope, database: database, verifier: verifier, client: client)
        let reread = try await repair.repair()
        let stored = try await database.transaction { [store] in try await store.purchaseStatesSeen([id], on: $0) }[id]?.appAccountToken
        return Outcome(
            originalTransactionId: id, appAccountToken: token, environment: scope.target.environment, reread: reread, stored: stored)
    }

    /// What the store knows of the ID: refuses a later transaction's ID and a Family Sharing purchase.
    private func check(_ id: String) async throws {
        let (originals, familyShared) = try await database.transaction { [store] transaction in
            (
                try await store.originalTransactionIds(ofTransaction: id, on: transaction),
                try await store.isFamilyShared(transactionId: id, on: transaction)
            )
        }
        if let original = originals.first, !originals.contains(id) {
            throw ReconcilerError(
                .malformedSelector,
                "\(id) is a later transaction of purchase \(original), not its original transaction ID: "
                    + "pass --original-transaction-id \(original); nothing was sent")
        }
        if familyShared == true {
            throw ReconcilerError(
                .malformedSelector,
                "purchase \(id) was shared through Family Sharing: Apple keeps no app account token for it; nothing was sent")
        }
    }

    /// Apple's answer as the reconciler's error, naming Apple's code.
    package static func failure(_ error: AppStoreServerAPIError, originalTransactionId id: String) -> ReconcilerError {
        let details = error.details
        if error.refusesTheCredentials { return ReconcilerError(apple: error) }
        if details.errorCode?.isRetryable == true {
            return .partial("the app account token was not set: \(error); run the same command again")
        }
        switch error {
        case .notFound where details.errorCode == .originalTransactionIdNotFound:
            return ReconcilerError(.unknownTransactionId, "Apple does not know original transaction ID \(id) (\(details))")
        case .badRequest, .notFound,
            .unexpectedStatus where (400..<500).contains(details.httpStatusCode ?? 0):
            return ReconcilerError(.appleRefused, "Apple refused the app account token: \(details)")
        default:
            return .partial("the app account token was not set: \(error); run the same command again")
        }
    }
}
