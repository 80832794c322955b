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
            """)

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
        let (token, apps, environment) = (appAccountToken?.lowercased(), scope.apps, scope.environment?.rawValue)
        let count = try await database.withCurrentSchema(logger: logger) { database in
            var buffer = Data()
            var count = 0
            try await store.exportPurchases(
                apps: apps, environment: environment, appAccountToken: token, entitlements: entitlements, otherApps: otherApps, at: at ?? .now,
                in: database
            ) { purchase in
                buffer.append(contentsOf: Array(try purchase.jsonLine().utf8))
                buffer.append(0x0A)
                count += 1
                if buffer.count > 1 << 16 {
                    sink.write(buffer)
                    buffer.removeAll(keepingCapacity: true)
                }
            }
            sink.write(buffer)
            return count
        }
        if output != nil {
            try sink.close()
            FileHandle.standardError.write(Data("exported \(Plural.count(count, "purchase")) to \(output!)\n".utf8))
        }
    }
}
