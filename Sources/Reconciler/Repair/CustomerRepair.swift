package import AppStoreServer
import Foundation
import Logging
package import ReconcilerDomain
package import ReconcilerShared
package import ReconcilerStore

/// `reconciler repair`: brings one customer in line with the App Store, from what a support
/// ticket gives (the order ID of Apple's receipt email, a transaction ID, or the app's user ID).
///
/// 1. Finds the customer: Look Up Order ID (its signed transactions verified), or the transaction
///    ID itself, or the purchases stored for the app account token.
/// 2. Pages Get Notification History with the `transactionId` filter (the whole customer) over
///    Apple's retention or from `since`, and replays every notification through the
///    ``NotificationHandler``, as a run does: dedup, no regression, quarantine.
/// 3. Reads Get Transaction History from the stored revision (from the start with
///    `fullHistory`) and Get All Subscription Statuses, through the run's gap filler.
///
/// It is recorded like a run (kind `repair`: `status`, metrics, the change feed, forwarding),
/// holds no run lease and waits for none, so it runs beside a scheduled run and `work`
/// processes; every request comes out of the shared budget, and nothing waits on Apple inside a
/// transaction. A dry run writes the run's shadow copies and reports what the real repair does.
///
/// ```swift
/// let repair = CustomerRepair(configuration: .init(selector: .orderId("MQ5Q7X2ZYB")), scope: target.scope, database: database, verifier: verifier, client: client)
/// let report = try await repair.repair()
/// print(report.humanSummary())
/// ```
///
/// Nothing is written before Apple has confirmed the customer: an unknown order, transaction ID
/// or app account token, a malformed one, or Apple refusing the first request throws
/// ``ReconcilerError`` with nothing changed.
package struct CustomerRepair: Sendable {
    /// How the operator names the customer.
    package enum Selector: Sendable, Hashable, CustomStringConvertible {
        /// The order ID on Apple's receipt email (`MQ5Q7X2ZYB`).
        case orderId(String)
        /// Any transaction or original transaction ID of the customer.
        case transactionId(String)
        /// The app's user ID (`appAccountToken`), lowercased; only purchases already stored have one.
        case appAccountToken(String)
        /// The app's own ID for the customer (`appUserId`, from `reconciler import`); only purchases
        /// already stored have one.
        case appUserId(String)

        package var description: String {
            switch self {
            case .appUserId(let id): "app-user-id \(Self.quoted(id))"
            case .orderId(let id): "order-id \(id)"
            case .transactionId(let id): "transaction-id \(id)"
            case .appAccountToken(let token): "app-account-token \(token)"
            }
        }

        /// Exactly one of the three, checked for its form before anything is asked of Apple.
        package static func parse(orderId: String?, transactionId: String?, appAccountToken: String?, appUserId: String? = nil) throws -> Selector {
            let given = [orderId, transactionId, appAccountToken, appUserId].compactMap { $0 }
            guard given.count == 1 else {
                throw ReconcilerError(
                    .selector,
                    "give exactly one of --order-id, --transaction-id, --app-account-token or --app-user-id"
                        + (given.isEmpty ? "" : " (\(given.count) were given)"))
            }
            if let appUserId {
                if let problem = ImportFileReader.appUserIdProblem(appUserId) { throw ReconcilerError(.malformedSelector, problem) }
                return .appUserId(appUserId)
            }
            if let orderId {
                guard let id = Self.orderId(orderId) else {
                    throw ReconcilerError(
                        .malformedSelector,
                        "--order-id: \(Self.quoted(orderId)) is not an order ID (letters and digits, as on Apple's receipt email, e.g. MQ5Q7X2ZYB)"
                    )
                }
                return .orderId(id)
            }
            if let transactionId {
                guard let id = Self.transactionId(transactionId) else {
                    throw ReconcilerError(
                        .malformedSelector,
                        "--transaction-id: \(Self.quoted(transactionId)) is not a transaction ID (digits, e.g. 2000000123456789)")
                }
                return .transactionId(id)
            }
            let token = (appAccountToken ?? "").trimmingCharacters(in: .whitespaces)
            guard let uuid = UUID(uuidString: token) else {
                throw ReconcilerError(
                    .malformedSelector,
                    "--app-account-token: \(Self.quoted(token)) is not a UUID (the app's appAccountToken, e.g. 7e3fb20b-4cdb-47cc-936d-99d65f608138)"
                )
            }
            return .appAccountToken(uuid.uuidString.lowercased())
        }

        /// The order ID in `text` (spaces around it dropped), or `nil` when it is not one: letters and
        /// digits, as on Apple's receipt email. `import` checks its rows by the same rule.
        package static func orderId(_ text: String) -> String? {
            let id = text.trimmingCharacters(in: .whitespaces)
            guard (1...64).contains(id.count), id.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else { return nil }
            return id
        }

        /// The transaction ID in `text` (spaces around it dropped), or `nil` when it is not one: digits.
        package static func transactionId(_ text: String) -> String? {
            let id = text.trimmingCharacters(in: .whitespaces)
            guard (1...32).contains(id.count), id.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
            return id
        }

        /// Operator input in a message: short, and without control characters.
        package static func quoted(_ text: String) -> String {
            let clean = String(text.unicodeScalars.filter { !CharacterSet.controlCharacters.contains($0) }.map(Character.init))
            return "\"" + (clean.count > 70 ? clean.prefix(70) + "…" : clean) + "\""
        }
    }

    package struct Configuration: Sendable {
        package var selector: Selector
        /// Where the notification history read starts (UNIX ms); `nil`: as far back as Apple keeps it.
        package var since: Timestamp?
        /// Read the transaction history from the start instead of from the stored revision.
        package var fullHistory: Bool
        /// Change nothing; report what the real repair would do.
        package var dryRun: Bool
        /// The app's own webhooks: the notifications the repair records for the first time that Apple
        /// did not deliver are queued for each that takes their type, as a run's are.
        package var forwardRoutes: [ForwardingRoute]
        /// Names this process in the ledger.
        package var worker: String

        package init(
            selector: Selector, since: Timestamp? = nil, fullHistory: Bool = false, dryRun: Bool = false,
            forwardRoutes: [ForwardingRoute] = [], worker: String = ProcessIdentity.current
        ) {
            self.selector = selector
            self.since = since
            self.fullHistory = fullHistory
            self.dryRun = dryRun
            self.forwardRoutes = forwardRoutes
            self.worker = worker
        }
    }

    package let configuration: Configuration
    let handler: NotificationHandler
    let client: AppStoreServerAPIClient
    let ledger: RunLedger
    let logger: Logger
    /// The app and environment the repair is for, as the command was given it.
    var app: AppTarget { handler.scope.target }

    /// - Parameter scope: the app and environment, with its rule for `entitled` (the verifier's app).
    package init(
        configuration: Configuration, scope: AppScope, database: Database, verifier: SignedDataVerifier, client: AppStoreServerAPIClient
    ) {
        self.configuration = configuration
        self.handler = NotificationHandler(scope: scope, verifier: verifier, database: database.shadowed(by: nil))
        self.client = client
        self.ledger = RunLedger(database: database)
        self.logger = database.logger
    }

    /// One App Store account to read: the transaction ID Apple is asked with, and the stored
    /// purchases already known to be its.
    struct Entry: Sendable {
        var transactionId: String
        var originals: [String]
    }

    /// What the selector named, before anything is written.
    struct Found: Sendable {
        var entries: [Entry]
        /// Signed transactions of a lookup answer that failed verification.
        var rejections: [Rejection] = []
    }

    /// Repairs the customer and returns the report; see ``CustomerRepair``.
    package func repair(progress: RunProgress = RunProgress()) async throws -> RepairReport {
        let startedAt = Date()
        let now = Timestamp(startedAt)
        let window = TimeWindow(start: configuration.since ?? (now - ReconcileRun.retention(app.environment) + .seconds(60)), end: now)
        do {
            try ReconcileRun.validate(window, environment: app.environment, now: now)
        } catch let error as ReconcilerError where error.code == .invalidWindow {
            throw ReconcilerError(.window, "--since: \(error.description)")
        }
        let (apiAtStart, timelineAtStart) = (client.statistics.snapshot, client.statistics.timeline)
        let tally = VerificationTally()
        let found = try await find(tally: tally)
        // Apple says on the first page whether it knows the transaction ID: still nothing written.
        var first: CustomerHistory?
        if let entry = found.entries.first {
            first = try await CustomerHistory.start(entry: entry, window: window, client: client)
        }
        let record = try await ledger.createRun(
            kind: .repair, app: app, window: window,
            dryRun: configuration.dryRun,
            options: RunOptions(refreshStatus: true, forwardRoutes: configuration.forwardRoutes, repairOf: configuration.selector.description),
            shards: [], holder: configuration.worker)
        logger.info(
            "repair started",
            metadata: [
                "runId": "\(record.runId)", "customer": "\(configuration.selector)", "dryRun": "\(record.dryRun)",
            ])
        let apiTimeline = APITimelineRecorder(
            runId: record.runId, worker: configuration.worker, client: client, ledger: ledger, since: timelineAtStart)
        var shadow: ShadowSchema?
        do {
            if record.dryRun { shadow = try await ShadowSchema.create(runId: record.runId, on: ledger.database) }
            let context = RunContext(
                run: record, handler: handler.shadowed(by: shadow), client: client, ledger: ledger, progress: progress,
                tally: tally, logger: logger)
            var work = RepairWork(repair: self, context: context)
            try await work.quarantineLookup(found.rejections)
            guard first != nil else {
                let detail = found.rejections.first.map { "\($0.reason.rawValue): \($0.detail)" }
                throw ReconcilerError(
                    .notGenuine,
                    "Look Up Order ID answered with signed transactions that failed verification; they are quarantined "
                        + "(`reconciler rejections`) and nothing was applied (repair \(record.runId))",
                    details: detail, runId: record.runId)
            }
            try await work.run(found.entries, first: &first)
            let api = client.statistics.snapshot.since(apiAtStart)
            var report = try await work.report(startedAt: startedAt, api: api)
            try await apiTimeline.record()
            var runReport = try await ReconcileRun.report(run: record, ledger: ledger, database: context.database, finishedAt: Date(), extraAPI: api)
            runReport.status = report.status
            runReport.failure = report.failures.first.map { "\($0.step) \($0.transactionId): \($0.error)" }
            try await ledger.finish(
                runId: record.runId, status: report.status, failure: runReport.failure, apiStatistics: api,
                report: String(decoding: try runReport.json(), as: UTF8.self))
            report.durationSeconds = Date().timeIntervalSince(startedAt)
            if let shadow { try await shadow.drop(on: ledger.database) }
            logger.info("repair finished", metadata: ["runId": "\(record.runId)", "status": "\(report.status.rawValue)"])
            return report
        } catch {
            await apiTimeline.recordDetached()
            await stopped(record, shadow: shadow, by: error, api: client.statistics.snapshot.since(apiAtStart))
            throw error
        }
    }

    /// Records how a repair that did not finish ended (when the database lets it), and drops a dry run's copies.
    private func stopped(_ record: RunRecord, shadow: ShadowSchema?, by error: any Error, api: APIStatistics.Snapshot) async {
        let status: RunRecord.Status = Task.isCancelled || error is CancellationError ? .interrupted : .failed
        let failure =
            (error as? ReconcilerError)?.description
            ?? String(describing: error).prefix(500).description
        let ledger = RunLedger(database: ledger.database.with(unavailableTimeout: .seconds(5)))
        try? await Task.detached {
            try await ledger.finish(runId: record.runId, status: status, failure: failure, apiStatistics: api, report: nil)
            try await shadow?.drop(on: ledger.database)
        }.value
    }

    // MARK: Finding the customer

    private func find(tally: VerificationTally) async throws -> Found {
        switch configuration.selector {
        case .orderId(let orderId): return try await lookUp(orderId: orderId, tally: tally)
        case .transactionId(let transactionId):
            let store = handler.store
            let originals = try await ledger.database.transaction { transaction in
                try await store.originalTransactionIds(ofTransaction: transactionId, on: transaction)
            }
            return Found(entries: [Entry(transactionId: transactionId, originals: originals)])
        case .appAccountToken(let token):
            let (store, environment) = (handler.store, app.environment)
            let originals = try await ledger.database.transaction { transaction in
                try await store.originalTransactionIds(ofAppAccountToken: token, on: transaction)
            }
            guard !originals.isEmpty else {
                throw ReconcilerError(
                    .unknownAppAccountToken,
                    """
                    no purchase stored in this database (\(environment)) carries the app account token \(token): the app may not have \
                    set it, or its purchases were never recorded; repair by --order-id (from the customer's receipt email) or \
                    --transaction-id instead
                    """)
            }
            // One entry per purchase: the first read covers every purchase of the same App Store account.
            return Found(entries: originals.map { Entry(transactionId: $0, originals: [$0]) })
        case .appUserId(let appUserId):
            let (store, environment) = (handler.store, app.environment)
            let originals = try await ledger.database.transaction { transaction in
                try await store.purchaseStates(ofAppUserId: appUserId, on: transaction).map(\.originalTransactionId)
            }
            guard !originals.isEmpty else {
                throw ReconcilerError(
                    .unknownAppUserId,
                    """
                    no purchase stored in this database (\(environment)) carries the app user ID \(Self.Selector.quoted(appUserId)): \
                    no `reconciler import` named the customer; import them, or repair by --order-id or --transaction-id instead
                    """)
            }
            // One entry per purchase: the first read covers every purchase of the same customer.
            return Found(entries: originals.map { Entry(transactionId: $0, originals: [$0]) })
        }
    }

    /// Look Up Order ID, every signed transaction verified; status 1 is an unknown order.
    func lookUp(orderId: String, tally: VerificationTally) async throws -> Found {
        let answer: OrderLookupResponse
        do {
            answer = try await client.lookUpOrderId(orderId)
        } catch let error as AppStoreServerAPIError {
            throw Self.refused(error, naming: "order ID \(orderId)")
        }
        guard answer.status == .valid, let signed = answer.signedTransactions, !signed.isEmpty else {
            throw ReconcilerError(
                .unknownOrderId,
                """
                the App Store has no purchase of this app (\(app.bundleId), \(app.environment)) in order \(orderId): check the order ID on the \
                customer's receipt email (it must be of this app, and of this environment), or repair by --transaction-id
                """, details: "Look Up Order ID status \(answer.status?.rawValue ?? -1)")
        }
        var verified: [Verified<JWSTransactionDecodedPayload>] = []
        var rejections: [Rejection] = []
        var failures: [VerificationError] = []
        for jws in signed {
            do {
                verified.append(try await handler.verifier.verifyTransaction(jws))
            } catch let error as VerificationError {
                failures.append(error)
                rejections.append(Rejection(source: .orderLookup, signedValue: jws, error: error))
            }
        }
        // Another app or environment is the configuration's fault: nothing is quarantined.
        try tally.record(verified: verified.count, failures: failures)
        let originals = Array(Set(verified.compactMap { $0.payload.originalTransactionId })).sorted()
        guard let first = verified.first?.payload, let id = first.transactionId ?? first.originalTransactionId else {
            return Found(entries: [], rejections: rejections)
        }
        return Found(entries: [Entry(transactionId: id, originals: originals)], rejections: rejections)
    }

    /// Apple refusing the request that names the customer, in the operator's words.
    static func refused(_ error: AppStoreServerAPIError, naming what: String) -> any Error {
        switch error {
        case .badRequest(let details) where details.errorCode == .invalidTransactionId:
            return ReconcilerError(
                .malformedSelector, "the App Store says \(what) is not a valid transaction ID; check it",
                details: details.description)
        case .notFound(let details) where details.errorCode == .transactionIdNotFound:
            return ReconcilerError(
                .unknownTransactionId,
                """
                the App Store knows no \(what) for this app in this environment: check the ID, and the environment \
                (a sandbox purchase is not in production)
                """, details: details.description)
        case .badRequest(let details), .notFound(let details), .unexpectedStatus(let details):
            return ReconcilerError(
                .appleRefused, "the App Store refused the request for \(what): \(error)",
                details: details.description)
        default:
            return error
        }
    }
}
