import AppStoreServer
import Foundation
import Logging
import PostgresNIO

/// Phase 2: for each customer at risk, Get Transaction History (v2, ascending) from the revision
/// stored in PostgreSQL (none stored: the whole history), verifies every signed transaction and
/// applies it through the same apply path as the handler (no regression by an older signedDate),
/// then stores the new revision in the same transaction as the last page. With `refreshStatus`,
/// Get All Subscription Statuses too, because replayed notifications are snapshots from their
/// send time.
///
/// The queue lives in PostgreSQL: a worker claims a customer with `FOR UPDATE SKIP LOCKED` and
/// holds the row until its last page commits, so `reconciler work` on other machines can share
/// the queue, and a killed worker's customer simply becomes pending again.
public struct GapFiller: Sendable {
    public struct Configuration: Sendable {
        public var runId: Int64
        public var environment: String
        public var dryRun: Bool
        public var refreshStatus: Bool
        /// Customers processed at the same time; the client's rate limiter keeps the total within budget.
        public var concurrency: Int
        /// Names this process in the queue.
        public var worker: String

        public init(runId: Int64, environment: String, dryRun: Bool, refreshStatus: Bool, concurrency: Int = 8, worker: String) {
            self.runId = runId
            self.environment = environment
            self.dryRun = dryRun
            self.refreshStatus = refreshStatus
            self.concurrency = concurrency
            self.worker = worker
        }
    }

    let configuration: Configuration
    let verifier: SignedDataVerifier
    let client: AppStoreServerAPIClient
    let database: Database
    let ledger: RunLedger
    let store: PurchaseStore
    let progress: RunProgress
    let logger: Logger

    public init(configuration: Configuration, verifier: SignedDataVerifier, client: AppStoreServerAPIClient, database: Database,
                ledger: RunLedger, progress: RunProgress, logger: Logger) {
        self.configuration = configuration
        self.verifier = verifier
        self.client = client
        self.database = database
        self.ledger = ledger
        self.store = PurchaseStore(logger: logger)
        self.progress = progress
        self.logger = logger
    }

    /// Works through the queue until no pending customer is left for this process to claim.
    public func run() async throws {
        let summary = try await ledger.queueSummary(runId: configuration.runId)
        progress.update {
            $0.phase = "gap fill"
            $0.customersTotal = summary.total
            $0.customersDone = summary.done
            $0.customersFailed = summary.failed
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<max(configuration.concurrency, 1) {
                group.addTask {
                    while try await processNextCustomer() {
                        try Task.checkCancellation()
                    }
                }
            }
            try await group.waitForAll()
        }
    }

    /// Claims and processes one customer; `false` when none was left to claim.
    private func processNextCustomer() async throws -> Bool {
        let runId = configuration.runId
        let worker = configuration.worker
        return try await database.transaction { claim in
            guard let anchor = try await ledger.claimCustomer(runId: runId, on: claim) else { return false }
            do {
                let seen = try await fill(anchor: anchor, claim: claim)
                try await ledger.completeCustomer(runId: runId, anchor: anchor, worker: worker, transactionsSeen: seen, on: claim)
                progress.update { $0.customersDone += 1 }
            } catch let error as AppStoreServerAPIError {
                if case .unauthorized = error { throw error }
                logger.error("customer not recovered", metadata: ["anchorTransactionId": "\(anchor)", "error": "\(error)"])
                try await ledger.failCustomer(runId: runId, anchor: anchor, worker: worker, error: error.description, on: claim)
                progress.update { $0.customersFailed += 1 }
            }
            return true
        }
    }

    /// Fetches and applies one customer's history; the last page goes in the claim transaction.
    private func fill(anchor: String, claim: PostgresConnection) async throws -> Int {
        let revision = try await ledger.revision(anchor: anchor)
        var originals = Set<String>()
        var seen = 0
        for try await page in client.transactionHistory(anyTransactionId: anchor, .init(revision: revision, sort: .ascending)) {
            let (transactions, rejections) = await verify(page.signedTransactions ?? [])
            seen += (page.signedTransactions ?? []).count
            originals.formUnion(transactions.compactMap(\.payload.originalTransactionId))
            if page.hasMore ?? false {
                try await database.transaction { connection in
                    try await applyAndRecord(transactions, rejections, on: connection)
                }
            } else {
                try await applyAndRecord(transactions, rejections, on: claim)
                if configuration.refreshStatus {
                    try await refreshStatuses(anchor: anchor, on: claim)
                }
                let newRevision = page.revision ?? revision
                let environment = configuration.environment
                try await Effects.apply(dryRun: configuration.dryRun, on: claim) {
                    if let newRevision {
                        try await ledger.storeRevision(anchor: anchor, environment: environment, revision: newRevision, on: claim)
                    }
                    try await ledger.setHistoryAnchor(anchor, for: Array(originals), on: claim)
                }
                try await ledger.markCovered(runId: configuration.runId, anchors: Array(originals), by: anchor, on: claim)
            }
        }
        return seen
    }

    typealias VerifiedTransaction = (payload: JWSTransactionDecodedPayload, jws: String)

    private func verify(_ signedTransactions: [String]) async -> ([VerifiedTransaction], [Rejection]) {
        var verified: [VerifiedTransaction] = []
        var rejections: [Rejection] = []
        for jws in signedTransactions {
            do {
                verified.append((try await verifier.verifyAndDecodeTransaction(jws), jws))
            } catch let error as VerificationError {
                logger.warning("rejected a signed transaction from history", metadata: ["reason": "\(error.reason.rawValue)"])
                rejections.append(Rejection(phase: "gap fill", notificationUUID: nil, reason: error.reason.rawValue, detail: error.detail,
                                            payloadSHA256: RunLedger.sha256(jws)))
            } catch {
                rejections.append(Rejection(phase: "gap fill", notificationUUID: nil, reason: "INVALID_PAYLOAD", detail: "\(error)",
                                            payloadSHA256: RunLedger.sha256(jws)))
            }
        }
        return (verified, rejections)
    }

    /// Applies verified transactions, and records changes and rejections.
    private func applyAndRecord(_ transactions: [VerifiedTransaction], _ rejections: [Rejection], on connection: PostgresConnection) async throws {
        let originals = Set(transactions.compactMap(\.payload.originalTransactionId))
        let environment = configuration.environment
        let changes = try await Effects.apply(dryRun: configuration.dryRun, on: connection) {
            try await store.lockPurchases(originals, on: connection)
            let before = try await store.purchaseStates(originals, on: connection)
            return try await store.apply(
                transactions: transactions, updates: originals.map { .init(originalTransactionId: $0, environment: environment) },
                before: before, on: connection)
        }
        try await ledger.recordChanges(runId: configuration.runId, Array(changes.values), on: connection)
        try await ledger.recordRejections(runId: configuration.runId, rejections, on: connection)
        if !rejections.isEmpty {
            try await ledger.count(runId: configuration.runId, rejections.map { _ in ("(transaction history)", "rejected") }, on: connection)
        }
    }

    /// Applies the current status, transaction and renewal info of each subscription.
    private func refreshStatuses(anchor: String, on connection: PostgresConnection) async throws {
        let response = try await client.getAllSubscriptionStatuses(anyTransactionId: anchor)
        var rejections: [Rejection] = []
        var items: [(status: Status?, transaction: VerifiedTransaction?, renewal: JWSRenewalInfoDecodedPayload?, original: String)] = []
        for item in (response.data ?? []).flatMap({ $0.lastTransactions ?? [] }) {
            do {
                var transaction: VerifiedTransaction?
                if let signed = item.signedTransactionInfo { transaction = (try await verifier.verifyAndDecodeTransaction(signed), signed) }
                var renewal: JWSRenewalInfoDecodedPayload?
                if let signed = item.signedRenewalInfo { renewal = try await verifier.verifyAndDecodeRenewalInfo(signed) }
                guard let original = transaction?.payload.originalTransactionId ?? renewal?.originalTransactionId ?? item.originalTransactionId else { continue }
                items.append((item.status, transaction, renewal, original))
            } catch let error as VerificationError {
                rejections.append(Rejection(phase: "status", notificationUUID: nil, reason: error.reason.rawValue, detail: error.detail,
                                            payloadSHA256: RunLedger.sha256(item.signedTransactionInfo ?? item.signedRenewalInfo ?? "")))
            }
        }
        let environment = configuration.environment
        let changes = try await Effects.apply(dryRun: configuration.dryRun, on: connection) {
            let originals = Set(items.map(\.original))
            try await store.lockPurchases(originals, on: connection)
            let before = try await store.purchaseStates(originals, on: connection)
            let updates = items.map { item in
                let signedDate = item.renewal?.signedDate ?? item.transaction?.payload.signedDate
                return PurchaseStore.PurchaseUpdate(
                    originalTransactionId: item.original, environment: environment, renewalInfo: item.renewal,
                    status: item.status.flatMap { status in signedDate.map { PurchaseStore.StatusFact(status: status, signedDate: $0) } })
            }
            return try await store.apply(transactions: items.compactMap(\.transaction), updates: updates, before: before, on: connection)
        }
        try await ledger.recordChanges(runId: configuration.runId, Array(changes.values), on: connection)
        try await ledger.recordRejections(runId: configuration.runId, rejections, on: connection)
    }
}
