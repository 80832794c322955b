import AppStoreServer
import Foundation
import Logging
import ReconcilerDomain
import ReconcilerShared
import ReconcilerStore

/// One customer's read of Apple, shared by phase 2 (``GapFiller``, so also `repair` and `import`)
/// and the app API's refreshes (``AppRefresher``): Get Transaction History (v2, ascending) from
/// the revision stored in PostgreSQL (none stored, `readFromStart`, or once after Apple refuses the
/// revision with 4000005: the whole history), and with its last page Get All Subscription
/// Statuses, every signed value verified and applied through the store's one write path (no
/// regression by an older signedDate).
///
/// Nothing waits on Apple inside a transaction: each page is fetched with no transaction open and
/// applied in one short transaction that locks every purchase it writes at once, in sorted order;
/// the statuses are fetched before the last page's transaction opens, and commit with it and the
/// customer's new revision and `checkedAt`. What else a page's transaction records (a run's
/// changes, rejections and queue row; for a refresh the quarantine alone) is its ``Recording``'s.
struct CustomerRead: Sendable {
    /// What a page's transaction records beside the purchases.
    protocol Recording: Sendable {
        /// The run the writes belong to (their change-feed rows name it); `nil` outside a run.
        var runId: Int64? { get }
        /// In the page's transaction, once its purchases are written: records `changes`,
        /// quarantines `rejections` (returned with ``Rejection/newlyQuarantined`` set) and, with the
        /// customer's last page (`completion`), ends the customer's work. Throws to roll the page back.
        func record(
            anchor: String, changes: [PurchaseChange], rejections: [Rejection], completion: Completion?, on transaction: DatabaseTransaction
        ) async throws -> [Rejection]
        /// Apple refused the stored revision: the history is read again from the start.
        func revisionReset(anchor: String) async throws
    }

    typealias VerifiedTransaction = Verified<JWSTransactionDecodedPayload>

    /// A subscription's current state from Get All Subscription Statuses, verified.
    struct StatusItem: Sendable {
        var status: Status?
        var subscription: VerifiedSubscription
        var original: String
    }

    /// What the customer's last page completes.
    struct Completion: Sendable {
        var revision: String?
        var purchases: [String]
        var transactionsSeen: Int
        var checkedAt: Timestamp
    }

    /// Writes the purchases (in a dry run, the handler that writes the shadow tables).
    let handler: NotificationHandler
    let client: AppStoreServerAPIClient
    /// Tells a forged payload from a wrong configuration.
    let tally: VerificationTally
    let logger: Logger
    let recording: any Recording
    /// Read the history from the start instead of from the stored revision (`repair --full`).
    var readFromStart = false
    /// Get All Subscription Statuses with the last page (a run's `refreshStatus`).
    var readStatuses = true
    /// The app's own ID `import` gives the customer: the purchases its history creates are
    /// written with it (``PurchaseStore/PurchaseUpdate/appUserId``).
    var appUserId: String? = nil
    /// Called with the purchases of the first page, before anything of it is written: `false`
    /// (another reader has this customer: an import's row in flight) stops the read with
    /// ``ReadElsewhere``.
    var claim: (@Sendable (_ originals: Set<String>) async throws -> Bool)? = nil

    /// The read stopped after its first page: another reader has the customer (``claim``).
    struct ReadElsewhere: Error {}

    var store: PurchaseStore { handler.store }
    var database: Database { handler.database }

    /// Fetches and applies one customer's history (and statuses), from the start once if Apple
    /// refuses the stored revision; returns the verified statuses applied with the last page.
    /// Apple's refusals are thrown as they came (a transaction ID Apple does not know: 4040010).
    func read(anchor: String) async throws -> [StatusItem] {
        // Anything that falls due after this instant makes the customer due again.
        let checkedAt = Timestamp.now
        var revision =
            readFromStart
            ? nil : try await database.transaction { [store] transaction in try await store.customers.revision(anchor: anchor, on: transaction) }
        var revisionReset = false
        while true {
            do {
                return try await read(anchor: anchor, from: revision, checkedAt: checkedAt)
            } catch let error as AppStoreServerAPIError where error.details.errorCode == .invalidRequestRevision && revision != nil && !revisionReset
            {
                logger.warning(
                    "Apple refused the stored revision; reading the customer's history from the start",
                    metadata: [
                        "customer": "\(anchor)"
                    ])
                try await database.transaction { [store] transaction in try await store.customers.dropRevision(anchor: anchor, on: transaction) }
                try await recording.revisionReset(anchor: anchor)
                revision = nil
                revisionReset = true
            }
        }
    }

    private func read(anchor: String, from revision: String?, checkedAt: Timestamp) async throws -> [StatusItem] {
        var originals = Set<String>()
        var seen = 0
        var applied: [StatusItem] = []
        for try await page in client.transactionHistory(anyTransactionId: anchor, .init(revision: revision, sort: .ascending)) {
            let signed = page.signedTransactions ?? []
            let (transactions, rejections) = try await verify(signed, source: .transactionHistory)
            if seen == 0, let claim, !(try await claim(Set(transactions.compactMap(\.payload.originalTransactionId)))) { throw ReadElsewhere() }
            seen += signed.count
            originals.formUnion(transactions.compactMap(\.payload.originalTransactionId))
            if page.hasMore ?? false {
                try await commit(anchor: anchor, transactions, rejections, statuses: [], final: nil)
            } else {
                // Statuses come from Apple before anything is locked; the last page commits with them.
                let statuses = readStatuses ? try await fetchStatuses(anchor: anchor) : ([], [])
                originals.formUnion(statuses.0.map(\.original))
                try await commit(
                    anchor: anchor, transactions, rejections + statuses.1, statuses: statuses.0,
                    final: .init(
                        revision: page.revision ?? revision, purchases: Array(originals), transactionsSeen: seen,
                        checkedAt: checkedAt))
                applied = statuses.0
            }
        }
        return applied
    }

    private func verify(_ signedTransactions: [String], source: Rejection.Source) async throws -> ([VerifiedTransaction], [Rejection]) {
        var verified: [VerifiedTransaction] = []
        var rejections: [Rejection] = []
        var failures: [VerificationError] = []
        for jws in signedTransactions {
            do {
                verified.append(try await handler.verifier.verifyTransaction(jws))
            } catch let error as VerificationError {
                failures.append(error)
                rejections.append(Rejection(source: source, signedValue: jws, error: error))
            }
        }
        try tally.record(verified: verified.count, failures: failures)
        return (verified, rejections)
    }

    /// Get All Subscription Statuses, every signed value verified.
    private func fetchStatuses(anchor: String) async throws -> ([StatusItem], [Rejection]) {
        let response = try await client.getAllSubscriptionStatuses(anyTransactionId: anchor)
        var items: [StatusItem] = []
        var rejections: [Rejection] = []
        var failures: [VerificationError] = []
        var verifiedCount = 0
        for item in (response.data ?? []).flatMap({ $0.lastTransactions ?? [] }) {
            do {
                let subscription = try await handler.verifier.verifySubscription(
                    signedTransactionInfo: item.signedTransactionInfo, signedRenewalInfo: item.signedRenewalInfo)
                verifiedCount += 1
                guard let original = subscription.originalTransactionId ?? item.originalTransactionId else { continue }
                items.append(StatusItem(status: item.status, subscription: subscription, original: original))
            } catch let error as VerificationError {
                failures.append(error)
                rejections.append(
                    Rejection(
                        source: .subscriptionStatus, signedValue: item.signedTransactionInfo ?? item.signedRenewalInfo ?? "",
                        error: error))
            }
        }
        try tally.record(verified: verifiedCount, failures: failures)
        return (items, rejections)
    }

    /// Applies one page (and, for the last, the statuses and the completion) in one short
    /// transaction that locks every purchase it writes at once, in sorted order.
    private func commit(
        anchor: String, _ transactions: [VerifiedTransaction], _ rejections: [Rejection], statuses: [StatusItem],
        final completion: Completion?
    ) async throws {
        let (store, recording, appUserId) = (self.store, self.recording, self.appUserId)
        let originals = Set(transactions.compactMap(\.payload.originalTransactionId)).union(statuses.map(\.original))
        try await database.storeHeaders(
            of: (transactions + statuses.compactMap(\.subscription.transaction)).compactMap { JWSParts(exactly: $0.signedValue) })
        let quarantined = try await database.transaction { transaction in
            try await store.lock(purchases: originals, anchors: completion == nil ? [] : [anchor], on: transaction)
            let before = try await store.purchaseStates(originals, on: transaction)
            let statusUpdates = statuses.map { item in
                let signedDate = item.subscription.renewalInfo?.payload.signedDate ?? item.subscription.transaction?.payload.signedDate
                var update = PurchaseStore.PurchaseUpdate(
                    originalTransactionId: item.original, renewalInfo: item.subscription.renewalInfo,
                    status: item.status.flatMap { status in signedDate.map { PurchaseStore.StatusFact(status: status, signedDate: $0) } })
                update.historyAnchor = anchor
                update.appUserId = appUserId
                return update
            }
            let updates =
                Set(transactions.compactMap(\.payload.originalTransactionId)).sorted().map {
                    var update = PurchaseStore.PurchaseUpdate(originalTransactionId: $0)
                    // A purchase of the customer's history takes the customer's appUserId.
                    update.historyAnchor = anchor
                    update.appUserId = appUserId
                    return update
                } + statusUpdates
            let changes = try await store.write(
                transactions: (transactions + statuses.compactMap(\.subscription.transaction)).map { PurchaseStore.TransactionWrite($0) },
                updates: updates, before: before,
                origin: .init(source: statuses.isEmpty ? .transactionHistory : .statusRefresh, runId: recording.runId), on: transaction)
            if let completion {
                try await store.customers.recordHistoryChecked(
                    anchor: anchor, revision: completion.revision, purchases: completion.purchases,
                    checkedAt: completion.checkedAt, on: transaction)
            }
            return try await recording.record(
                anchor: anchor, changes: Array(changes.values), rejections: rejections, completion: completion, on: transaction)
        }
        for rejection in quarantined {
            logger.warning(
                "quarantined a signed value from \(rejection.source.rawValue)",
                metadata: [
                    "reason": "\(rejection.reason.rawValue)", "new": "\(rejection.newlyQuarantined)",
                ])
        }
    }
}
