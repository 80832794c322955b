import AppStoreServer
import ArgumentParser
import Foundation
import Reconciler
import ReconcilerDomain
import ReconcilerShared
import ReconcilerStore

/// `reconciler verify-stored`: every stored signed value, rebuilt from the database and verified again.
struct VerifyStoredCommand: AsyncParsableCommand, UsesAppsOptions {
    static let configuration = CommandConfiguration(
        commandName: "verify-stored",
        abstract: "Rebuild every stored signed value from the database and verify it again; list any that do not verify.",
        discussion: """
            After Apple's history retention (180 days), the JWS a notification or transaction came in is the only \
            evidence that a purchase happened. This rebuilds each stored value byte for byte from what the \
            database holds (the header stored once, the payload, the signature), checks it against the SHA-256 \
            stored with it, verifies it as the webhook did when it arrived (signature, chain to the trusted roots \
            at its signedDate, the app and environment of the configuration; nested transaction and renewal info \
            too) and that it still names its row's notification or transaction. Values of an app the \
            configuration does not name are checked for their signature and chain only, and listed.

            --since T checks only notifications received, and transactions written, at or after T (ISO 8601 \
            with a zone, UNIX ms, now-7d). Payloads removed by `prune --payloads-older-than` are counted apart: there is \
            nothing left to verify, and that is not a failure. It reads in batches of short transactions, \
            beside `serve` and runs.

            Exit codes: 0 every stored value verifies; 1 usage or configuration; 2 the database went away; 3 a \
            stored value does not verify (each is listed: the database was changed, restore those rows).

              reconciler verify-stored
              reconciler verify-stored --since now-7d --json
            """)

    @Option(
        help: ArgumentHelp("Only values stored at or after this time (ISO 8601 with a zone, UNIX ms, now-7d).", valueName: "T"),
        transform: Timestamp.argument)
    var since: Timestamp?

    @Flag(help: "Print the report as JSON.")
    var json = false

    @OptionGroup var options: StoredDataOptions

    func run() async throws {
        let logger = logging.makeLogger()
        let since = self.since?.date
        // The configured apps are checked fully; without one, every value's signature and chain only.
        let verifiers =
            try app.resolvedBundleId != nil || app.configurationFile != nil
            ? app.verifyingTargets().verifiers
            : [
                SignedDataVerifier(
                    configuration: .init(
                        rootCertificates: try app.roots((app.rootCertificates ?? Env.value("APP_STORE_ROOT_CERTIFICATES")).map(AppOptions.paths)),
                        bundleId: "-", appAppleId: 0, environment: .production))
            ]
        let appChecked = app.resolvedBundleId != nil || app.configurationFile != nil
        let json = self.json
        let report = try await database.withCurrentSchema(logger: logger) { database in
            let start = ContinuousClock.now
            let lastPrinted = Locked(start)
            return try await StoredPayloadVerifier(database: database, verifiers: verifiers).verify(since: since) { report in
                // Progress on long work: to standard error every 10 seconds.
                let now = ContinuousClock.now
                let due = lastPrinted.withLock { last in
                    guard now - last >= .seconds(10) else { return false }
                    last = now
                    return true
                }
                guard due else { return }
                let (n, t) = (report.notifications, report.transactions)
                FileHandle.standardError.write(
                    Data(
                        ("verify-stored: \(Plural.count(n.verified + n.pruned + n.failed, "notification")), \(Plural.count(t.verified + t.pruned + t.failed, "transaction")) "
                            + "checked so far (\((now - start).components.seconds) s)\n").utf8))
            }
        }
        if json {
            try StandardOutput.printJSON(report, escapingSlashes: false)
        } else {
            print(Self.text(report, appChecked: appChecked))
        }
        guard report.failures.isEmpty else {
            // The report first, then the error on standard error.
            fflush(nil)
            throw ReconcilerError(.storedPayloadNotGenuine, "\(report.failures.count) stored signed values do not verify (listed above)")
        }
    }

    static func text(_ report: StoredPayloadVerifier.Report, appChecked: Bool) -> String {
        func counts(_ counts: StoredPayloadVerifier.Counts, _ name: String, inside: Bool) -> String {
            var held = ["\(counts.storedWhole) stored whole"]
            if inside { held.append("\(counts.insideNotification) inside their notification") }
            if counts.legacy > 0 { held.append("\(counts.legacy) not compacted yet (compact-payloads)") }
            return "  \(name): \(counts.verified) verified (\(held.joined(separator: ", "))), \(counts.failed) do not verify, "
                + "\(counts.pruned) pruned (not checked); \(Plural.count(counts.signedBytes, "byte")) as signed"
        }
        var lines = [
            "verify-stored: signed values stored \(report.since.map { "since \($0.formatted(.iso8601))" } ?? "at any time"), rebuilt from the database and verified",
            counts(report.notifications, "notifications", inside: false),
            counts(report.transactions, "transactions", inside: true),
        ]
        if !appChecked {
            lines.append("  note: no app is configured (APP_STORE_BUNDLE_ID or --config): signatures and chains were checked, not apps")
        } else if !report.unconfiguredApps.isEmpty {
            lines.append(
                "  apps the configuration does not name (signature and chain checked only): \(report.unconfiguredApps.joined(separator: ", "))")
        }
        for failure in report.failures {
            lines.append(
                "NOT VERIFIED \(failure.kind.rawValue) \(failure.id) (\(failure.bundleId), \(failure.environment)): \(failure.reason): \(failure.detail)"
            )
        }
        return lines.joined(separator: "\n")
    }
}
