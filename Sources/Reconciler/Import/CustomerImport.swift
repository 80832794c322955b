package import AppStoreServer
import Foundation
import Logging
package import ReconcilerDomain
import ReconcilerShared
package import ReconcilerStore

/// `reconciler import`: reads every customer an import file names (the app's own database holds
/// their transaction IDs and order IDs), so customers Apple's notification history no longer
/// shows are in `export`, `entitled` and the change feed.
///
/// Each distinct customer is read once, by `repair`'s path: an order ID through Look Up Order ID
/// (its signed transactions verified), then Get Transaction History from the stored revision (from
/// the start for a new customer) and Get All Subscription Statuses through the run's gap filler,
/// the same verified, deduplicated, never-regressing write path as a run's phase 2. A row naming
/// a customer already read (another of their transaction IDs) costs no request. Completion is
/// recorded per (app, environment, ID) as each customer is applied, so a rerun skips what is
/// complete (all of it, without `refresh`) and a killed import continues where it stopped.
///
/// Rows are resolved ``Configuration/concurrency`` at a time, so the import spends its budget
/// (each endpoint's rate limiter paces the requests) rather than waiting on one customer's round
/// trips; the file is streamed and nothing grows with it in memory. A row waits for an earlier
/// row in flight that names the same transaction ID, order ID or appUserId, so it finds that
/// customer read. Two rows in flight naming one customer by different IDs are told apart by
/// Apple's first page (``CustomerClaims``): the later one stops after it and finds the customer
/// read, one request instead of the whole history and the statuses.
///
/// Each target (the app in production, then the sandbox) has a run of kind `import`; a
/// transaction ID production does not know (4040010), or an order it has no purchase in, is tried
/// in the next. No run lease is held and no transaction is open while Apple is called.
///
/// ```swift
/// let result = try await CustomerImport(configuration: .init(), targets: targets, database: database)
///     .run(rows: { try ImportFileReader(format: .csv, source: .file(handle)) }, check: check)
/// ```
package struct CustomerImport: Sendable {
    package struct Configuration: Sendable {
        /// Read again the customers an earlier import completed.
        package var refresh: Bool
        /// Names this process in the ledger.
        package var worker: String
        /// Rows resolved at the same time: enough to keep each endpoint at its budget while
        /// requests take Apple's round trip (at 40/s and 0.5 s a customer, 20 in flight).
        package var concurrency: Int

        package init(refresh: Bool = false, worker: String = ProcessIdentity.current, concurrency: Int = 32) {
            self.refresh = refresh
            self.worker = worker
            self.concurrency = max(concurrency, 1)
        }
    }

    /// One app in one environment the import reads customers from.
    package struct Target: Sendable {
        package var scope: AppScope
        package var verifier: SignedDataVerifier
        package var client: AppStoreServerAPIClient

        package init(scope: AppScope, verifier: SignedDataVerifier, client: AppStoreServerAPIClient) {
            self.scope = scope
            self.verifier = verifier
            self.client = client
        }
    }

    /// A row the import could not resolve (Apple refused or failed); a rerun tries it again.
    package struct Failure: Sendable, Hashable {
        package var line: Int
        package var id: String
        package var kind: FailureKind
        package var error: String
    }

    /// The report, and what the command's exit code needs beside it.
    package struct Result: Sendable {
        package var report: ImportReport
        package var runIds: [Int64]
        /// Rows whose ID an earlier import completed (no request).
        package var alreadyComplete = 0
        /// Rows naming a customer this or an earlier import read by another ID (no request).
        package var sameCustomer = 0
        /// The first ``ImportFileCheck/listLimit`` rows that failed; the counts below are complete.
        package var failures: [Failure] = []
        package var retryableFailures = 0
        package var permanentFailures = 0
        /// Signed values quarantined for the first time.
        package var newlyQuarantined = 0

        /// Counts one row's resolution (rows finish out of the file's order: the lists keep the
        /// lowest lines).
        mutating func record(_ resolution: Resolution, of row: ImportRow) {
            switch resolution {
            case .read(let purchases):
                report.customers += 1
                report.purchases += purchases
            case .alreadyComplete: alreadyComplete += 1
            case .sameCustomer, .readElsewhere: sameCustomer += 1
            case .notFound:
                report.add(notFound: .init(line: row.line, transactionId: row.transactionId, orderId: row.transactionId == nil ? row.orderId : nil))
            case .failed(let kind, let error):
                if kind == .retryable { retryableFailures += 1 } else { permanentFailures += 1 }
                let failure = Failure(line: row.line, id: row.transactionId ?? row.orderId ?? "", kind: kind, error: error)
                failures.insert(failure, keepingLowest: ImportFileCheck.listLimit) { $0.line }
            }
        }

        /// 2 when something retryable failed, 4 when Apple refused a request or a signed value was
        /// quarantined for the first time, `nil` when every valid row was resolved or reported not found.
        package var ending: ReconcilerError? {
            if retryableFailures > 0 {
                let first = failures.first { $0.kind == .retryable }.map { " (first: line \($0.line), \($0.id): \($0.error))" } ?? ""
                return .partial(
                    "\(Plural.count(retryableFailures, "row")) not imported\(first); run the same import again: it continues where it stopped")
            }
            if permanentFailures > 0, let first = failures.first {
                return .attention(
                    "Apple refused \(Plural.count(permanentFailures, "row")) (first: line \(first.line), \(first.id): \(first.error)); "
                        + "`reconciler status` shows the import's runs")
            }
            if newlyQuarantined > 0 {
                return .attention("\(Plural.count(newlyQuarantined, "signed value")) quarantined; see `reconciler rejections`")
            }
            return nil
        }
    }

    package let configuration: Configuration
    let targets: [Target]
    let database: Database
    let logger: Logger
    /// Which row in flight reads which customer.
    let claims = CustomerClaims()

    /// - Parameter targets: the app's environments to try, production first.
    package init(configuration: Configuration, targets: [Target], database: Database) {
        self.configuration = configuration
        self.targets = targets
        self.database = database
        self.logger = database.logger
    }

    /// One environment's run of the import and what it reads with.
    struct Leg: Sendable {
        let target: Target
        let repair: CustomerRepair
        let context: RunContext
        var environment: AppStoreEnvironment { target.scope.target.environment }
        var completions: ImportCompletions
    }

    /// How one row was resolved.
    enum Resolution: Sendable {
        case read(purchases: Int)
        case alreadyComplete
        case sameCustomer
        case notFound
        case failed(FailureKind, String)
        /// Another row in flight read the customer (``CustomerClaims``): the row asks the database again.
        case readElsewhere

        /// The customer is read: by this row, or by another row in flight (see ``read(anchor:leg:)``).
        var isRead: Bool {
            switch self {
            case .read, .sameCustomer: true
            default: false
            }
        }
    }

    /// Streams the rows of `rows()` (the file, read again after its check) and imports each valid
    /// one; `check` is the file's check, whose invalid rows the report carries.
    package func run(
        rows makeReader: () throws -> ImportFileReader, check: ImportFileCheck, progress: ImportProgress = ImportProgress()
    ) async throws -> Result {
        guard let first = targets.first else { throw ReconcilerError.configuration("no app to import into") }
        let startedAt = Date()
        let now = Timestamp(startedAt)
        let window = TimeWindow(start: now - .seconds(1), end: now)
        let statisticsAtStart = targets.map { ($0.client.statistics.snapshot, $0.client.statistics.timeline) }
        let ledger = RunLedger(database: database)
        var legs: [Leg] = []
        for target in targets {
            let record = try await ledger.createRun(
                kind: .import, app: target.scope.target, window: window,
                dryRun: false, options: RunOptions(refreshStatus: true), shards: [], holder: configuration.worker)
            let repair = CustomerRepair(
                configuration: .init(selector: .transactionId("0"), worker: configuration.worker), scope: target.scope, database: database,
                verifier: target.verifier, client: target.client)
            let context = RunContext(
                run: record, handler: repair.handler, client: target.client, ledger: ledger, progress: RunProgress(), tally: VerificationTally(),
                logger: logger)
            legs.append(
                Leg(
                    target: target, repair: repair, context: context,
                    completions: ImportCompletions(logger: logger, bundleId: first.scope.target.bundleId)))
        }
        logger.info("import started", metadata: ["runIds": "\(legs.map(\.context.run.runId))", "rows": "\(check.rowsRead)"])
        var result = Result(report: ImportReport(), runIds: legs.map(\.context.run.runId))
        result.report.rowsRead = check.rowsRead
        result.report.invalid = check.invalid
        result.report.invalidCount = check.invalidCount
        progress.start(total: check.rowsRead)
        do {
            try await resolveRows(try makeReader(), legs: legs, into: &result, progress: progress)
            for leg in legs {
                let runId = leg.context.run.runId
                let counts = try await ledger.changeCounts(runId: runId)
                result.report.created += counts.created
                result.report.changed += counts.changed
                result.newlyQuarantined += try await ledger.rejections(runId: runId).filter(\.newlyQuarantined).count
            }
            for (leg, (snapshot, timeline)) in zip(legs, statisticsAtStart) {
                for entry in leg.target.client.statistics.timeline.since(timeline).entries {
                    result.report.requests[entry.endpoint, default: 0] += entry.counts.requests
                }
                let api = leg.target.client.statistics.snapshot.since(snapshot)
                let status: RunRecord.Status =
                    result.retryableFailures > 0
                    ? .partial : (result.ending == nil ? .succeeded : .succeededWithRejections)
                try await ledger.finish(
                    runId: leg.context.run.runId, status: status, failure: result.failures.first.map { "line \($0.line) \($0.id): \($0.error)" },
                    apiStatistics: api, report: String(decoding: try result.report.json(), as: UTF8.self))
            }
            result.report.durationSeconds = Date().timeIntervalSince(startedAt)
            logger.info("import finished", metadata: ["customers": "\(result.report.customers)", "notFound": "\(result.report.notFoundCount)"])
            return result
        } catch {
            let status: RunRecord.Status = Task.isCancelled || error is CancellationError ? .interrupted : .failed
            let failure = (error as? ReconcilerError)?.description ?? String(describing: error).prefix(500).description
            let stopping = RunLedger(database: database.with(unavailableTimeout: .seconds(5)))
            let runIds = result.runIds
            try? await Task.detached {
                for runId in runIds {
                    try await stopping.finish(runId: runId, status: status, failure: failure, apiStatistics: .zero, report: nil)
                }
            }.value
            throw error
        }
    }

    /// A row in flight, with the IDs and appUserId it names.
    struct Resolved: Sendable {
        var row: ImportRow
        var keys: [String]
        var resolution: Resolution
    }

    /// Resolves the reader's rows `concurrency` at a time, in the file's order; a row naming an
    /// ID or appUserId of a row in flight waits for that one first.
    private func resolveRows(_ reader: ImportFileReader, legs: [Leg], into result: inout Result, progress: ImportProgress) async throws {
        var reader = reader
        try await withThrowingTaskGroup(of: Resolved.self) { group in
            var inFlight = Set<String>()
            var running = 0
            func finished(_ resolved: Resolved, _ result: inout Result) {
                running -= 1
                inFlight.subtract(resolved.keys)
                result.record(resolved.resolution, of: resolved.row)
                progress.rowDone()
            }
            while let record = try reader.next() {
                try Task.checkCancellation()
                guard case .row(let row) = record else {
                    progress.rowDone()
                    continue
                }
                let keys = [row.transactionId.map { "t:" + $0 }, row.orderId.map { "o:" + $0 }, row.appUserId.map { "u:" + $0 }].compactMap { $0 }
                while running >= configuration.concurrency || keys.contains(where: inFlight.contains) {
                    guard let resolved = try await group.next() else { break }
                    finished(resolved, &result)
                }
                running += 1
                inFlight.formUnion(keys)
                group.addTask { [claims] in
                    defer { claims.release(owner: row.line) }
                    return Resolved(row: row, keys: keys, resolution: try await resolve(row, legs: legs))
                }
            }
            while let resolved = try await group.next() { finished(resolved, &result) }
        }
    }

    // MARK: One row

    private func resolve(_ row: ImportRow, legs: [Leg]) async throws -> Resolution {
        let (kind, id): (ImportCompletions.IdKind, String) = row.transactionId.map { (.transactionId, $0) } ?? (.orderId, row.orderId ?? "")
        let completions = legs[0].completions
        let environments = legs.map(\.environment)
        if !configuration.refresh,
            let done = try await database.transaction({ try await completions.completion(kind, id, environments: environments, on: $0) })
        {
            guard done.outcome == .read else { return .notFound }
            // A later import names the customer's appUserId anew: no request, only the database.
            if let leg = legs.first(where: { $0.environment == done.environment }) { try await assignUser(of: row, anchor: done.anchor, leg: leg) }
            return .alreadyComplete
        }
        if let transactionId = row.transactionId {
            // Until the customer is found read, or this row reads it (another row in flight that
            // had it may have ended without reading it).
            rows: while true {
                // Another row already named this customer: no request.
                for leg in legs {
                    if let anchor = try await customerRead(transactionIds: [transactionId], leg: leg) {
                        try await complete(.transactionId, transactionId, leg: leg, outcome: .read, anchor: anchor)
                        try await assignUser(of: row, anchor: anchor, leg: leg)
                        return .sameCustomer
                    }
                }
                for leg in legs {
                    switch try await read(anchor: transactionId, appUserId: row.appUserId, owner: row.line, leg: leg) {
                    case .readElsewhere: continue rows
                    case let resolution where resolution.isRead:
                        try await complete(.transactionId, transactionId, leg: leg, outcome: .read, anchor: transactionId)
                        try await assignUser(of: row, anchor: transactionId, leg: leg)
                        return resolution
                    case .notFound: continue
                    case let other: return other
                    }
                }
                break
            }
            guard row.orderId != nil else {
                try await complete(.transactionId, transactionId, leg: legs[legs.count - 1], outcome: .notFound, anchor: nil)
                return .notFound
            }
        }
        guard let orderId = row.orderId else { return .notFound }
        for leg in legs {
            let found: CustomerRepair.Found
            do {
                found = try await leg.repair.lookUp(orderId: orderId, tally: leg.context.tally)
            } catch let error as ReconcilerError where error.code == .unknownOrderId {
                continue
            } catch let error as ReconcilerError where error.code == .appleRefused || error.code == .malformedSelector {
                return .failed(.permanent, error.description)
            } catch let error as AppStoreServerAPIError {
                if error.refusesTheCredentials { throw error }
                return .failed(error.failureKind, error.description)
            }
            try await RepairWork(repair: leg.repair, context: leg.context).quarantineLookup(found.rejections)
            guard let entry = found.entries.first else {
                return .failed(.permanent, "Look Up Order ID answered with signed transactions that failed verification (quarantined)")
            }
            var resolution = Resolution.readElsewhere
            while case .readElsewhere = resolution {
                if let anchor = try await customerRead(transactionIds: [entry.transactionId] + entry.originals, leg: leg) {
                    try await complete(.orderId, orderId, leg: leg, outcome: .read, anchor: anchor)
                    try await assignUser(of: row, anchor: anchor, leg: leg)
                    resolution = .sameCustomer
                } else {
                    resolution = try await read(anchor: entry.transactionId, appUserId: row.appUserId, owner: row.line, leg: leg)
                    if case .readElsewhere = resolution { continue }
                    guard resolution.isRead else { return resolution }
                    try await complete(.orderId, orderId, leg: leg, outcome: .read, anchor: entry.transactionId)
                    try await assignUser(of: row, anchor: entry.transactionId, leg: leg)
                }
            }
            if let transactionId = row.transactionId {
                // Apple did not know the row's transaction ID; its order named the customer.
                try await complete(.transactionId, transactionId, leg: leg, outcome: .notFound, anchor: nil)
            }
            return resolution
        }
        try await complete(.orderId, orderId, leg: legs[legs.count - 1], outcome: .notFound, anchor: nil)
        return .notFound
    }

    /// The customer (anchor) of these transaction IDs when an import already read it: this
    /// import, or (without `refresh`) any earlier one.
    private func customerRead(transactionIds: [String], leg: Leg) async throws -> String? {
        let (store, completions, environment) = (leg.context.store, leg.completions, leg.environment)
        let runId: Int64? = configuration.refresh ? leg.context.run.runId : nil
        return try await database.transaction { transaction in
            var originals = Set<String>()
            for id in transactionIds { originals.formUnion(try await store.originalTransactionIds(ofTransaction: id, on: transaction)) }
            guard !originals.isEmpty else { return nil }
            let anchors = try await store.customers.anchors(of: Array(originals), on: transaction)
            return try await completions.readAnchor(of: anchors, environment: environment, runId: runId, on: transaction)
        }
    }

    /// Reads one customer by `repair`'s path: the customer is the import run's one-row queue for
    /// the run's gap filler (transaction history from the stored revision, then the statuses).
    /// The purchases it creates are written with the row's `appUserId`. The row (`owner`) claims the
    /// customer with the first page; when another row in flight has it, the read stops there, waits
    /// for that row and returns ``Resolution/readElsewhere``.
    private func read(anchor: String, appUserId: String?, owner: Int, leg: Leg) async throws -> Resolution {
        let (ledger, run) = (leg.context.ledger, leg.context.run)
        try await ledger.database.transaction { transaction in
            try await ledger.enqueue(runId: run.runId, anchors: [anchor], reason: .touched, on: transaction)
        }
        let notFound = Locked(false)
        let failure = Locked<AppStoreServerAPIError?>(nil)
        let given: @Sendable (String) -> String? = { $0 == anchor ? appUserId : nil }
        let elsewhere = Locked<Int?>(nil)
        let filler = GapFiller(
            configuration: .init(
                concurrency: 1, worker: configuration.worker,
                customerFailed: { _, error in failure.withLock { $0 = error } },
                customerNotFound: { _ in notFound.withLock { $0 = true } },
                appUserId: given,
                claim: { [claims, environment = leg.environment] _, originals in
                    if let other = claims.claim(originals, environment: environment, by: owner) {
                        elsewhere.withLock { $0 = other }
                        return false
                    }
                    // A row that had the customer may have finished while this one's first page
                    // waited for its turn at the budget.
                    return try await customerRead(transactionIds: Array(originals), leg: leg) == nil
                }),
            context: leg.context)
        // Another row in flight reads this customer (its order ID names this transaction): no request.
        do {
            guard try await filler.fill(customer: anchor) else { return .sameCustomer }
        } catch is CustomerRead.ReadElsewhere {
            if let other = elsewhere.withLock({ $0 }) { await claims.wait(for: other) }
            return .readElsewhere
        }
        if notFound.withLock({ $0 }) { return .notFound }
        if let error = failure.withLock({ $0 }) { return .failed(error.failureKind, error.description) }
        let store = leg.context.store
        let purchases = try await database.transaction { transaction in
            try await store.customerPurchases(of: [], anchors: [anchor], on: transaction)
        }
        return .read(purchases: purchases.count)
    }

    /// Gives the row's `appUserId` (when it has one) to every purchase of the customer `anchor`,
    /// replacing an earlier one: a feed row (the data path's source, the import's run) per purchase
    /// it changes, counted as changed in the report. The purchases the read created already have
    /// it; the customer's later purchases take it in the write path.
    private func assignUser(of row: ImportRow, anchor: String?, leg: Leg) async throws {
        guard let appUserId = row.appUserId, let anchor else { return }
        let (store, ledger, runId) = (leg.context.store, leg.context.ledger, leg.context.run.runId)
        try await database.transaction { transaction in
            let changes = try await store.assignAppUserId(
                appUserId, toCustomer: anchor, origin: .init(source: .transactionHistory, runId: runId), on: transaction)
            try await ledger.recordChanges(runId: runId, changes, on: transaction)
        }
    }

    private func complete(
        _ kind: ImportCompletions.IdKind, _ id: String, leg: Leg, outcome: ImportCompletions.Outcome, anchor: String?
    ) async throws {
        let (completions, environment, runId) = (leg.completions, leg.environment, leg.context.run.runId)
        try await database.transaction { transaction in
            try await completions.complete(kind, id, environment: environment, outcome: outcome, anchor: anchor, runId: runId, on: transaction)
        }
    }
}
