import AppStoreServer
import Foundation
import Logging
import ReconcilerDomain
import ReconcilerShared
import ReconcilerStore

/// Phase 2: for each customer at risk, Get Transaction History (v2, ascending) from the revision
/// stored in PostgreSQL (none stored: the whole history), verifies every signed transaction and
/// applies it through the store's one write path (no regression by an older signedDate). With
/// `refreshStatus`, Get All Subscription Statuses too, because replayed notifications are
/// snapshots from their send time. Each customer's read is a ``CustomerRead`` (the app API's
/// refreshes read the same way, without a run).
///
/// Nothing waits on Apple inside a transaction: a worker leases a customer (a queue row it owns
/// for a while), fetches a page with no transaction open, and applies it in a short transaction
/// that also renews the lease. The last page, the statuses (fetched before anything is locked),
/// the new revision and the completion of the queue row commit together, with one sorted set of
/// locks. `reconciler work` on other machines shares the queue; a dead worker's lease runs out
/// and another worker takes the customer over. A revision Apple refuses (4000005) is dropped
/// and the history read from the start, once.
struct GapFiller: Sendable {
    struct Configuration: Sendable {
        /// Customers processed at the same time; the client's rate limiter keeps the total within budget.
        var concurrency: Int
        /// Names this process in the queue.
        var worker: String
        /// How long a customer stays leased without renewal (each page renews it); longer than the
        /// longest wait for a rate-limited endpoint, so a live worker keeps its customer.
        var leaseDuration: Duration = .seconds(150)
        /// Read every customer's history from the start, not from the stored revision (`repair --full`).
        var readFromStart = false
        /// Told each customer's verified statuses once they are applied (`repair` reports what Apple said).
        var statusesApplied: (@Sendable (_ anchor: String, _ statuses: [StatusItem]) -> Void)? = nil
        /// Told each customer Apple did not answer for, with Apple's error (`import` tries the
        /// sandbox for a transaction ID production does not know).
        var customerFailed: (@Sendable (_ anchor: String, _ error: AppStoreServerAPIError) -> Void)? = nil
        /// With it, a transaction ID Apple does not know (4040010) is an answer, not a failure:
        /// the customer is done, nothing is given up, and this is told (`import` lists unknown IDs).
        var customerNotFound: (@Sendable (_ anchor: String) -> Void)? = nil
        /// The app's own ID `import` gives a customer, by anchor: the purchases its history
        /// creates are written with it (``PurchaseStore/PurchaseUpdate/appUserId``).
        var appUserId: (@Sendable (_ anchor: String) -> String?)? = nil
        /// Claims the customer with its first page's purchases (``CustomerRead/claim``): `false`
        /// ends the customer's queue row unread and throws ``CustomerRead/ReadElsewhere``.
        var claim: (@Sendable (_ anchor: String, _ originals: Set<String>) async throws -> Bool)? = nil
    }

    let configuration: Configuration
    let context: RunContext

    var run: RunRecord { context.run }
    var handler: NotificationHandler { context.handler }
    var client: AppStoreServerAPIClient { context.client }
    var ledger: RunLedger { context.ledger }
    var store: PurchaseStore { context.store }
    var database: Database { context.database }
    var progress: RunProgress { context.progress }
    var logger: Logger { context.logger }

    /// Works through the queue until no customer is left for this process to lease and
    /// `phaseOneRunning` says phase 1 (which queues customers as it replays) has ended.
    func fill(while phaseOneRunning: @escaping @Sendable () -> Bool = { false }) async throws {
        // The progress counts come from the queue, not from this process's tally: phase 1 keeps
        // queueing customers (and queues a customer read already again) while phase 2 works.
        let counts = QueueProgress(ledger: ledger, runId: run.runId, progress: progress)
        try await counts.refresh()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<max(configuration.concurrency, 1) {
                group.addTask {
                    while true {
                        try Task.checkCancellation()
                        if let anchor = try await ledger.leaseCustomer(
                            runId: run.runId, worker: configuration.worker, leaseDuration: configuration.leaseDuration)
                        {
                            try await recover(customer: anchor)
                            try await counts.refreshIfDue()
                        } else if phaseOneRunning() {
                            await context.newCustomers.wait(upTo: .seconds(2))
                            try await counts.refreshIfDue()
                        } else {
                            return
                        }
                    }
                }
            }
            // The first error stops the other workers (leaving the group cancels them).
            for try await _ in group {}
        }
        try await counts.refresh()
    }

    /// Reads the run's queued customer `anchor` alone, when nobody else works on it: `import`
    /// reads each row's customer by its own call, several at once (no queue count per customer:
    /// the import counts its rows). `false` when another worker holds it (or it is done).
    @discardableResult
    func fill(customer anchor: String) async throws -> Bool {
        try Task.checkCancellation()
        guard
            let leased = try await ledger.leaseCustomer(
                runId: run.runId, anchor: anchor, worker: configuration.worker, leaseDuration: configuration.leaseDuration)
        else { return false }
        try await recover(customer: leased)
        return true
    }

    /// Phase 2's counts in ``RunProgress``, read from the queue at most once a second while
    /// customers finish (a count over the run's queue per customer would cost more than the work).
    private struct QueueProgress: Sendable {
        let ledger: RunLedger
        let runId: Int64
        let progress: RunProgress
        let lastRead = Locked<ContinuousClock.Instant?>(nil)

        func refresh() async throws {
            lastRead.withLock { $0 = .now }
            let summary = try await ledger.queueSummary(runId: runId)
            progress.update {
                $0.customersTotal = summary.total
                $0.customersDone = summary.done
                $0.customersFailed = summary.failed + summary.givenUp
            }
        }

        func refreshIfDue() async throws {
            let due = lastRead.withLock { last in
                guard let read = last, read.duration(to: .now) < .seconds(1) else {
                    last = .now
                    return true
                }
                return false
            }
            if due { try await refresh() }
        }
    }

    /// The customer's lease went to another worker: it finishes the customer.
    struct LeaseLost: Error {}

    private func recover(customer anchor: String) async throws {
        do {
            try await readHistory(of: anchor)
            progress.update { $0.customersDoneHere += 1 }
        } catch is LeaseLost {
            logger.info("another worker took the customer over", metadata: ["customer": "\(anchor)"])
        } catch let error as CustomerRead.ReadElsewhere {
            // Nothing was written; the row is done here (a later read enqueues it again).
            let (ledger, runId, worker) = (self.ledger, run.runId, configuration.worker)
            _ = try await ledger.database.transaction { transaction in
                try await ledger.completeCustomer(runId: runId, anchor: anchor, worker: worker, transactionsSeen: 0, on: transaction)
            }
            throw error
        } catch let error as AppStoreServerAPIError
            where error.details.errorCode == .transactionIdNotFound && configuration.customerNotFound != nil
        {
            let (ledger, runId, worker) = (self.ledger, run.runId, configuration.worker)
            _ = try await ledger.database.transaction { transaction in
                try await ledger.completeCustomer(runId: runId, anchor: anchor, worker: worker, transactionsSeen: 0, on: transaction)
            }
            configuration.customerNotFound?(anchor)
        } catch let error as AppStoreServerAPIError {
            if error.refusesTheCredentials { throw error }
            configuration.customerFailed?(anchor, error)
            let outcome = try await ledger.failCustomer(
                runId: run.runId, anchor: anchor, worker: configuration.worker, kind: error.failureKind,
                error: error.description, policy: context.giveUp)
            if case .givenUp(let failures) = outcome {
                logger.error(
                    "customer given up: its transaction history failed \(failures) time\(failures == 1 ? "" : "s") in a row; `reconciler rejections` lists it",
                    metadata: ["customer": "\(anchor)", "kind": "\(error.failureKind.rawValue)", "error": "\(error)"])
            } else {
                logger.error("customer not recovered", metadata: ["customer": "\(anchor)", "error": "\(error)"])
            }
            progress.update { $0.customersFailedHere += 1 }
        } catch {
            // Stopping (SIGTERM, a configuration error, the database): give the customer back at once.
            let (ledger, runId, worker) = (self.ledger, run.runId, configuration.worker)
            try? await Task.detached {
                try await RunLedger(database: ledger.database.with(unavailableTimeout: .seconds(2)))
                    .releaseCustomer(runId: runId, anchor: anchor, worker: worker)
            }.value
            throw error
        }
    }

    /// Fetches and applies one customer's history (and statuses) through ``CustomerRead``, its
    /// pages recorded under the run and its queue row.
    private func readHistory(of anchor: String) async throws {
        let recording = RunRecording(ledger: ledger, run: run, worker: configuration.worker, leaseDuration: configuration.leaseDuration)
        var claim: (@Sendable (Set<String>) async throws -> Bool)?
        if let claimed = configuration.claim { claim = { originals in try await claimed(anchor, originals) } }
        let read = CustomerRead(
            handler: handler, client: client, tally: context.tally, logger: logger, recording: recording,
            readFromStart: configuration.readFromStart, readStatuses: run.options.refreshStatus,
            appUserId: configuration.appUserId?(anchor), claim: claim)
        let statuses = try await read.read(anchor: anchor)
        configuration.statusesApplied?(anchor, statuses)
    }

    typealias StatusItem = CustomerRead.StatusItem

    /// What a run records in each page's transaction: the changes and rejections under the run,
    /// and the customer's queue row (its lease renewed by each page, completed by the last; a lease
    /// another worker took throws ``LeaseLost`` and rolls the page back).
    struct RunRecording: CustomerRead.Recording {
        let ledger: RunLedger
        let run: RunRecord
        let worker: String
        let leaseDuration: Duration

        var runId: Int64? { run.runId }

        func record(
            anchor: String, changes: [PurchaseChange], rejections: [Rejection], completion: CustomerRead.Completion?,
            on transaction: DatabaseTransaction
        ) async throws -> [Rejection] {
            try await ledger.recordChanges(runId: run.runId, changes, on: transaction)
            let quarantined = try await ledger.quarantine(rejections, runId: run.runId, app: run.app, dryRun: run.dryRun, on: transaction)
            try await ledger.addCounts(runId: run.runId, quarantined.map { ("(\($0.source.rawValue))", .rejected) }, on: transaction)
            if let completion {
                try await ledger.markCovered(runId: run.runId, anchors: completion.purchases, by: anchor, on: transaction)
                guard
                    try await ledger.completeCustomer(
                        runId: run.runId, anchor: anchor, worker: worker, transactionsSeen: completion.transactionsSeen, on: transaction)
                else { throw LeaseLost() }
            } else {
                guard
                    try await ledger.renewCustomerLease(
                        runId: run.runId, anchor: anchor, worker: worker, leaseDuration: leaseDuration, on: transaction)
                else { throw LeaseLost() }
            }
            return quarantined
        }

        func revisionReset(anchor: String) async throws {
            try await ledger.noteRevisionReset(runId: run.runId, anchor: anchor)
        }
    }
}
