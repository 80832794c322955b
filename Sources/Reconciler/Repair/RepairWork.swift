import AppStoreServer
import Foundation
import Logging
import ReconcilerDomain
import ReconcilerShared
import ReconcilerStore

/// One customer's Get Notification History (the `transactionId` filter covers the whole
/// customer), with its first page fetched before the repair writes anything: Apple's answer to
/// it says whether the transaction ID is known.
struct CustomerHistory: Sendable {
    let entry: CustomerRepair.Entry
    let request: NotificationHistoryRequest
    let firstPage: NotificationHistoryPage

    static func start(
        entry: CustomerRepair.Entry, window: TimeWindow, client: AppStoreServerAPIClient
    ) async throws -> CustomerHistory {
        let request = NotificationHistoryRequest(
            startDate: window.start.millisecondsSince1970, endDate: window.end.millisecondsSince1970, transactionId: entry.transactionId)
        do {
            var pages = client.notificationHistory(request).makeAsyncIterator()
            guard let first = try await pages.next() else {
                throw AppStoreServerAPIError.invalidResponse(.init(endpoint: .getNotificationHistory, errorMessage: "no first page", attempts: 1))
            }
            return CustomerHistory(entry: entry, request: request, firstPage: first)
        } catch let error as AppStoreServerAPIError {
            throw CustomerRepair.refused(error, naming: "transaction ID \(entry.transactionId)")
        }
    }
}

/// The work of one repair once it is recorded: the replay of each App Store account's
/// notifications, its transaction history and statuses through the gap filler, and what the
/// report needs from them.
struct RepairWork: Sendable {
    let repair: CustomerRepair
    let context: RunContext

    var run: RunRecord { context.run }
    var ledger: RunLedger { context.ledger }
    var logger: Logger { context.logger }

    /// The customer's purchases as they were before anything was written (the real rows).
    var before: [String: PurchaseState] = [:]
    /// Purchases found to be the customer's, and the transaction ids already read.
    var covered = Set<String>()
    var customer: [String] = []
    var notificationsSeen = 0
    var alreadyStored = 0
    var missed: [RepairReport.MissedNotification] = []
    var failures: [RepairReport.Failure] = []
    let statuses = Locked<[RepairReport.AppleStatus]>([])

    init(repair: CustomerRepair, context: RunContext) {
        self.repair = repair
        self.context = context
    }

    /// Quarantines the signed transactions of a lookup answer that failed verification, under the repair.
    func quarantineLookup(_ rejections: [Rejection]) async throws {
        guard !rejections.isEmpty else { return }
        let (ledger, run) = (self.ledger, self.run)
        let quarantined = try await ledger.database.transaction { transaction in
            let quarantined = try await ledger.quarantine(
                rejections, runId: run.runId, app: run.app,
                dryRun: run.dryRun, on: transaction)
            try await ledger.addCounts(runId: run.runId, quarantined.map { ("(\($0.source.rawValue))", .rejected) }, on: transaction)
            return quarantined
        }
        for rejection in quarantined {
            logger.warning(
                "quarantined a signed transaction of the Look Up Order ID answer",
                metadata: [
                    "reason": "\(rejection.reason.rawValue)", "new": "\(rejection.newlyQuarantined)",
                ])
        }
    }

    /// Reads every App Store account the entries name, each once: the first entry's history was
    /// started before the repair was recorded; an entry whose purchases an earlier one covered is skipped.
    mutating func run(_ entries: [CustomerRepair.Entry], first: inout CustomerHistory?) async throws {
        let real = PurchaseStore(database: ledger.database, scope: context.store.scope)
        let known = entries.flatMap(\.originals)
        before = try await ledger.database.transaction { transaction in
            try await real.purchaseStates(try await real.customerPurchases(of: known, on: transaction), on: transaction)
        }
        for entry in entries {
            if covered.contains(entry.transactionId) || (!entry.originals.isEmpty && covered.isSuperset(of: entry.originals)) { continue }
            let history: CustomerHistory
            if let started = first {
                history = started
                first = nil
            } else {
                do {
                    history = try await CustomerHistory.start(
                        entry: entry, window: run.window, client: context.client)
                } catch let error as ReconcilerError {
                    failures.append(
                        .init(step: "notification history", transactionId: entry.transactionId, kind: .permanent, error: error.description))
                    continue
                } catch let error as AppStoreServerAPIError {
                    if error.refusesTheCredentials { throw error }
                    failures.append(
                        .init(
                            step: "notification history", transactionId: entry.transactionId, kind: error.failureKind,
                            error: error.description))
                    continue
                }
            }
            customer.append(entry.transactionId)
            let seen = try await replay(history)
            let originals = entry.originals + seen.sorted()
            let store = context.store
            let anchor =
                try await context.database.transaction { transaction in
                    try await store.customers.anchors(of: originals, on: transaction).sorted().first
                } ?? entry.transactionId
            try await readTransactionHistory(anchor: anchor)
            let customerPurchases = try await context.database.transaction { transaction in
                try await store.customerPurchases(of: originals, anchors: [anchor], on: transaction)
            }
            covered.formUnion(customerPurchases)
            covered.formUnion([entry.transactionId, anchor])
        }
    }

    /// Replays the customer's notification history page by page, each page in its own short
    /// transaction; returns the purchases its notifications are about. An expired pagination token
    /// restarts the query (dedup makes that harmless); another failure is reported and the repair goes on.
    private mutating func replay(_ history: CustomerHistory) async throws -> Set<String> {
        var originals = try await record(history.firstPage)
        guard history.firstPage.hasMore else { return originals }
        var token = history.firstPage.nextPaginationToken
        var restarts = 0
        while true {
            do {
                for try await page in context.client.notificationHistory(history.request, startingAt: token) {
                    originals.formUnion(try await record(page))
                }
                return originals
            } catch AppStoreServerAPIError.paginationTokenExpired(let details) {
                restarts += 1
                guard restarts <= 5 else {
                    failures.append(
                        .init(
                            step: "notification history", transactionId: history.entry.transactionId, kind: .retryable,
                            error: "pagination token expired \(Plural.count(restarts, "time")): \(details)"))
                    return originals
                }
                token = nil
            } catch let error as AppStoreServerAPIError {
                if error.refusesTheCredentials { throw error }
                failures.append(
                    .init(
                        step: "notification history", transactionId: history.entry.transactionId, kind: error.failureKind,
                        error: error.description))
                return originals
            }
        }
    }

    /// Verifies a page with no transaction open, then records it in one short transaction.
    private mutating func record(_ page: NotificationHistoryPage) async throws -> Set<String> {
        let verified = try await VerifiedHistoryPage(items: page.items, context: context)
        let context = self.context
        try await context.database.storeHeaders(of: verified.notifications.flatMap(\.signedParts))
        let recorded = try await context.database.transaction { transaction in try await verified.record(context: context, on: transaction) }
        for rejection in recorded.rejections {
            logger.warning(
                "quarantined a notification from history",
                metadata: [
                    "reason": "\(rejection.reason.rawValue)", "notificationUUID": "\(rejection.notificationUUID ?? "?")",
                    "new": "\(rejection.newlyQuarantined)",
                ])
        }
        notificationsSeen += page.items.count
        let signedDates = Dictionary(verified.notifications.map { ($0.notificationUUID, $0.signedDate) }, uniquingKeysWith: { first, _ in first })
        for result in recorded.results {
            guard result.outcome != .duplicate else {
                alreadyStored += 1
                continue
            }
            missed.append(
                .init(
                    notificationUUID: result.notificationUUID, type: result.typeAndSubtype, signedDate: signedDates[result.notificationUUID] ?? 0,
                    originalTransactionId: result.originalTransactionId, outcome: result.outcome,
                    deliveredByApple: !verified.undelivered.contains(result.notificationUUID)))
        }
        context.progress.update { progress in
            progress.pages += 1
            progress.notificationsSeen += page.items.count
            progress.applied += recorded.results.filter { $0.outcome == .applied }.count
            progress.duplicates += recorded.results.filter { $0.outcome == .duplicate }.count
            progress.rejected += recorded.rejections.count
        }
        return Set(recorded.results.compactMap(\.originalTransactionId))
    }

    /// Get Transaction History from the stored revision and Get All Subscription Statuses, through
    /// the run's gap filler: the customer is the repair's one-row queue.
    private func readTransactionHistory(anchor: String) async throws {
        let (ledger, run) = (self.ledger, self.run)
        try await ledger.database.transaction { transaction in
            try await ledger.enqueue(runId: run.runId, anchors: [anchor], reason: .touched, on: transaction)
        }
        let statuses = self.statuses
        let filler = GapFiller(
            configuration: .init(
                concurrency: 1, worker: repair.configuration.worker, readFromStart: repair.configuration.fullHistory,
                statusesApplied: { _, items in
                    statuses.withLock { $0 += items.map(RepairReport.AppleStatus.init) }
                }), context: context)
        try await filler.fill()
    }

    /// The report, read back from what was written (a dry run's copies where it made them).
    func report(startedAt: Date, api: APIStatistics.Snapshot) async throws -> RepairReport {
        let (store, runId) = (context.store, run.runId)
        let changes = Dictionary(try await ledger.changes(runId: runId).map { ($0.after.originalTransactionId, $0) }, uniquingKeysWith: { $1 })
        let purchases = covered.union(before.keys).union(changes.keys)
        let (after, historyChanges) = try await context.database.transaction { transaction in
            (
                try await store.purchaseStatesSeen(purchases, on: transaction),
                try await store.changes(runId: runId, sources: [.transactionHistory, .statusRefresh], on: transaction)
            )
        }
        let failedCustomers = try await ledger.failedCustomers(runId: runId).map {
            RepairReport.Failure(step: "transaction history", transactionId: $0.anchorTransactionId, kind: $0.kind, error: $0.error)
        }
        let failures = self.failures + failedCustomers
        let rejections = try await ledger.rejections(runId: runId)
        let status: RunRecord.Status
        if failures.contains(where: { $0.kind == .retryable }) {
            status = .partial
        } else if rejections.contains(where: \.newlyQuarantined) || failures.contains(where: { $0.kind == .permanent }) {
            status = .succeededWithRejections
        } else {
            status = .succeeded
        }
        let gapFill = try await ledger.gapFillTotals(runId: runId)
        return RepairReport(
            runId: runId, selector: repair.configuration.selector.description, environment: run.environment, bundleId: run.bundleId,
            dryRun: run.dryRun, status: status, startedAt: startedAt, durationSeconds: Date().timeIntervalSince(startedAt),
            windowStart: run.window.start, windowEnd: run.window.end, customer: customer,
            purchases: after.keys.sorted().map { id in
                let now = after[id]!
                if let earlier = before[id] { return PurchaseChange(before: earlier, after: now) }
                if let change = changes[id] { return PurchaseChange(before: change.before, after: now) }
                return PurchaseChange(before: now, after: now)
            },
            notificationsSeen: notificationsSeen, notificationsAlreadyStored: alreadyStored,
            missedNotifications: missed.sorted { ($0.signedDate, $0.notificationUUID) < ($1.signedDate, $1.notificationUUID) },
            transactionsFetched: gapFill.transactionsSeen, transactionHistoryChanges: historyChanges,
            statuses: statuses.withLock { $0 }.sorted { $0.originalTransactionId < $1.originalTransactionId },
            rejections: rejections, failures: failures, forwarding: nil, api: api)
    }
}

extension RepairReport.AppleStatus {
    init(_ item: GapFiller.StatusItem) {
        let transaction = item.subscription.transaction?.payload
        let renewal = item.subscription.renewalInfo?.payload
        self.init(
            originalTransactionId: item.original, productId: transaction?.productId, status: item.status?.rawValue,
            expiresDate: transaction?.expiresDate, autoRenewStatus: renewal?.autoRenewStatus?.rawValue,
            gracePeriodExpiresDate: renewal?.gracePeriodExpiresDate)
    }
}
