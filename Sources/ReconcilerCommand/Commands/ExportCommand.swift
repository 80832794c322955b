import AppStoreServer
import ArgumentParser
import Foundation
import Reconciler
import ReconcilerConfiguration
import ReconcilerDomain
import ReconcilerShared
import ReconcilerStore

struct ExportCommand: AsyncParsableCommand, UsesAppsOptions {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Print the state of every purchase as JSON lines.",
        discussion: """
            One JSON object per line per subscription or one-time purchase, ordered by \
            originalTransactionId, with originalTransactionId, latestTransactionId, productId, bundleId, \
            environment, purchaseDate, expiresDate, revocationDate, autoRenewStatus, lastSignedDate and \
            entitled (dates in ms since the epoch, null when absent).

            It covers every app and environment of the configuration file (--config, RECONCILER_CONFIG), each \
            purchase's `entitled` judged by its own app's choices (sandboxEntitles, nonRenewingTerms, \
            entitleBillingRetry); --app and --environment narrow it. With the APP_STORE_* variables it covers the \
            one app in its environment (--environment chooses the other); with neither, every purchase stored.

              reconciler export > purchases.jsonl
              reconciler export --environment sandbox --output sandbox.jsonl
              reconciler export --app com.example.two

            --transactions prints one line per stored transaction instead (its newest signed state), keys in \
            this order: transactionId, originalTransactionId, productId, type, purchaseDate, expiresDate, \
            revocationDate, price and currency exactly as Apple signs them (price in milliunits: 9990 is 9.99), \
            storefront, offerType, offerIdentifier, revocationType, revocationPercentage, the commitment fields \
            (billingPlanType, billingPeriodNumber, commitmentExpiresDate, commitmentPrice, totalBillingPeriods), \
            bundleId, environment, appUserId (null: not stored yet) and updatedAt (when the reconciler last wrote \
            the row), ordered by updatedAt. --changed-since T keeps the rows written at or after T: an incremental \
            load passes the last updatedAt it loaded minus a few minutes (a transaction that commits late keeps \
            the time it started), and keys its rows by transactionId. Apple says price is not the record for \
            revenue: App Store Connect's reports are.

            --format csv prints either view as CSV (RFC 4180): the header is the JSON keys in their order, null \
            is an empty field, dates are UNIX milliseconds as Apple sends them, Booleans true and false.

            --history prints every state of each purchase the change feed keeps, with validFrom and validTo \
            (when its feed row was written, and the next one's: null for the current state), changeId, source and \
            the purchase view's fields; the first line says what pruning removed ({"prunedThroughChangeId": N}: a \
            purchase's history starts at its first row kept); with --format csv that line goes to standard error. \
            With --app-user-id it keeps the purchases that carry that appUserId now, each with every state kept.

              reconciler export --transactions --format csv --output transactions.csv
              reconciler export --history --format csv > history.csv
              reconciler export --transactions --changed-since now-1h
            """)

    /// How the lines are printed.
    enum Format: String, ExpressibleByArgument, CaseIterable {
        case jsonl, csv
    }

    @Flag(help: "One line per stored transaction (its newest signed state), with its price, currency and storefront.")
    var transactions = false

    @Flag(help: "Every state of each purchase the change feed keeps, with validFrom and validTo.")
    var history = false

    @Option(
        name: .long,
        help: ArgumentHelp(
            "With --transactions: only rows the reconciler wrote at or after T (ISO 8601 with a zone, UNIX ms, now-1h).", valueName: "T"),
        transform: Timestamp.argument)
    var changedSince: Timestamp?

    @Option(help: ArgumentHelp("jsonl (one JSON object a line) or csv (RFC 4180, with a header).", valueName: "format"))
    var format: Format = .jsonl

    @OptionGroup var options: StoredDataOptions

    @Option(name: .shortAndLong, help: ArgumentHelp("Write to this file instead of standard output.", valueName: "path"))
    var output: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Only this app user's purchases: what does the user with this appAccountToken have now?",
            valueName: "uuid"))
    var appAccountToken: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Only this app user's purchases (or, with --transactions, transactions; with --history, their kept states), "
                + "by the app's own ID for them that `reconciler import` gave.",
            valueName: "id"))
    var appUserId: String?

    @Option(
        name: .long, help: ArgumentHelp("Judge `entitled` at this time instead of now (ISO 8601 with a zone, UNIX ms, now-1h).", valueName: "T"),
        transform: Timestamp.argument)
    var at: Timestamp?

    @Flag(name: .long, help: "A subscription in Apple's billing retry counts as entitled (env RECONCILER_ENTITLE_BILLING_RETRY=1).")
    var entitleBillingRetry = false

    @Option(
        name: .long,
        help: ArgumentHelp(
            "How long a non-renewing subscription lasts, e.g. com.example.pass.30d=30d (repeatable; env RECONCILER_NON_RENEWING_TERMS); "
                + "without one, its `entitled` is null: Apple sends no expiry for them.",
            valueName: "product=duration"))
    var nonRenewingTerm: [String] = []

    func validate() throws {
        if changedSince != nil, !transactions { throw ValidationError("--changed-since needs --transactions") }
        if history, transactions { throw ValidationError("--history and --transactions are two views: give one") }
        if history, appAccountToken != nil || at != nil {
            throw ValidationError("--app-account-token and --at apply to the purchase view, not --history")
        }
        if let problem = appUserId.flatMap(ImportFileReader.appUserIdProblem) { throw ValidationError(problem) }
        if transactions, appAccountToken != nil || at != nil {
            throw ValidationError("--app-account-token and --at apply to the purchase view, not --transactions")
        }
    }

    func run() async throws {
        let logger = logging.makeLogger()
        let scope = try app.storedScope()
        let sink: FileHandle
        if let output {
            guard FileManager.default.createFile(atPath: output, contents: nil), let handle = FileHandle(forWritingAtPath: output) else {
                throw ReconcilerError.configuration("cannot write \(output)")
            }
            sink = handle
        } else {
            sink = FileHandle.standardOutput
        }
        if let appAccountToken, UUID(uuidString: appAccountToken) == nil {
            throw ReconcilerError.configuration("--app-account-token: \(appAccountToken) is not a UUID (the app's appAccountToken)")
        }
        // Each app and environment's own choices, with this command's flags added.
        let store = PurchaseStore(logger: logger)
        // Apps the configuration does not name (an export of whatever the database holds): the variables' rule.
        let otherApps = try EntitlementOptions.policy(entitleBillingRetry: entitleBillingRetry, terms: nonRenewingTerm)
        let entitlements = try Dictionary(
            (scope.targets ?? []).map { target in
                (target.app, try EntitlementOptions.policy(target.entitlement, entitleBillingRetry: entitleBillingRetry, terms: nonRenewingTerm))
            }, uniquingKeysWith: { first, _ in first })
        let (token, apps, environment) = (appAccountToken?.lowercased(), scope.apps, scope.environment)
        let (format, transactions, history, changedSince, at, appUserId) = (format, transactions, history, changedSince, at, appUserId)
        let count = try await database.withCurrentSchema(logger: logger) { database in
            var buffer = Data()
            var count = 0
            func write(_ line: String) {
                buffer.append(contentsOf: Array(line.utf8))
                if buffer.count > 1 << 16 {
                    sink.write(buffer)
                    buffer.removeAll(keepingCapacity: true)
                }
            }
            func emit(_ row: ExportRow) throws {
                write(format == .csv ? row.csvRecord : try row.jsonLine() + "\n")
                count += 1
            }
            if history {
                let pruned = try await store.prunedThroughChangeId(in: database)
                let note = #"{"prunedThroughChangeId":\#(pruned)}"#
                if format == .csv { FileHandle.standardError.write(Data((note + "\n").utf8)) } else { write(note + "\n") }
                var header = false
                try await store.exportHistory(apps: apps, environment: environment, appUserId: appUserId, in: database) { row in
                    if format == .csv, !header {
                        write(row.csvHeader)
                        header = true
                    }
                    try emit(row)
                }
            } else if transactions {
                if format == .csv { write(ExportRow(PurchaseStore.transactionExportKeys.map { ($0, .null) }).csvHeader) }
                try await store.exportTransactions(
                    apps: apps, environment: environment, changedSince: changedSince, appUserId: appUserId, in: database, emit)
            } else {
                if format == .csv { write(try ExportRow(sortedJSONObject: PurchaseState(originalTransactionId: "").jsonLine()).csvHeader) }
                try await store.exportPurchases(
                    apps: apps, environment: environment, appAccountToken: token, appUserId: appUserId, entitlements: entitlements,
                    otherApps: otherApps, at: at ?? .now, in: database
                ) { purchase in
                    if format == .csv {
                        try emit(try ExportRow(sortedJSONObject: try purchase.jsonLine()))
                    } else {
                        write(try purchase.jsonLine() + "\n")
                        count += 1
                    }
                }
            }
            sink.write(buffer)
            return count
        }
        if output != nil {
            try sink.close()
            FileHandle.standardError.write(
                Data("exported \(Plural.count(count, transactions ? "transaction" : history ? "purchase state" : "purchase")) to \(output!)\n".utf8))
        }
    }
}
