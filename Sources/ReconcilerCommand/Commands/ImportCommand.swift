import AppStoreServer
import ArgumentParser
import Foundation
import Logging
import Reconciler
import ReconcilerDomain
import ReconcilerShared
import ReconcilerStore

struct ImportCommand: AsyncParsableCommand, UsesAppsOptions {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Import the customers an app's own database names (transaction IDs, order IDs), however old.",
        discussion: """
            Reads FILE (- for standard input): CSV (RFC 4180, UTF-8, optional BOM, LF or CRLF) with a header of \
            the exact, case-sensitive columns transactionId, orderId and appUserId in any order, or with .jsonl \
            (or --format jsonl) one JSON object a line with the same keys. Each row names a transactionId (any \
            transaction ID of the customer: original, a renewal's, a consumable's, an appTransactionId) or an \
            orderId (from the customer's receipt email) or both; blank lines are skipped. The whole file is \
            checked first: an unknown column, a row with neither ID or a malformed ID is reported by its line \
            (the header is line 1) and nothing is asked of Apple, unless --skip-invalid.

            Each distinct customer is then read once, as `repair` reads one: Look Up Order ID for an order ID, \
            Get Transaction History from the stored revision (from the start for a new customer) and Get All \
            Subscription Statuses, verified and applied through the same path as a run. Where the app is \
            configured in both environments, an ID production does not know is tried in the sandbox. What is \
            complete is recorded per app, environment and ID: run it again (after a kill, or on a grown file) \
            and it reads only what is not complete; --refresh reads everything again. It holds no run lease, \
            shares the app's request budget, and is recorded as a run of kind import (`reconciler status`).

            Exit codes: 0 every valid row imported or reported as not found; 4 Apple refused a request (other \
            than not found) or a signed value was quarantined for the first time; 2 something retryable failed \
            (run it again: it continues); 1 a bad file, configuration or usage.

              reconciler import customers.csv --dry-run
              reconciler import customers.csv --report-json import-report.json
              psql -Atc "..." | reconciler import - --format jsonl --app com.example.app
            """)

    @Argument(help: ArgumentHelp("The file of customers, or - for standard input.", valueName: "file")) var file: String
    @Option(help: ArgumentHelp("csv or jsonl (default: jsonl for a .jsonl file, csv otherwise).", valueName: "format")) var format: String?
    @Flag(help: "Check the file and print what the import would take; call nothing, change nothing.") var dryRun = false
    @Flag(help: "Read again the customers an earlier import completed.") var refresh = false
    @Flag(help: "Import the valid rows of a file with invalid ones (listed in the report).") var skipInvalid = false
    @Option(help: ArgumentHelp("Write the import's report as JSON to this file.", valueName: "path")) var reportJson: String?

    @OptionGroup var options: AppleOptions

    func validate() throws {
        if let format, ImportFormat(rawValue: format.lowercased()) == nil {
            throw ValidationError("unknown format \(format); use csv or jsonl")
        }
    }

    var importFormat: ImportFormat {
        format.flatMap { ImportFormat(rawValue: $0.lowercased()) } ?? (file == "-" ? .csv : ImportFormat(path: file))
    }

    func run() async throws {
        let logger = logging.makeLogger()
        // Standard input is read twice (checked, then imported): it is copied to a file first, a chunk at a time.
        let spooled = file == "-" ? try Self.spoolStandardInput() : nil
        defer { if let spooled { try? FileManager.default.removeItem(atPath: spooled) } }
        let path = spooled ?? file
        let format = importFormat
        let file = self.file
        let reader: @Sendable () throws -> ImportFileReader = {
            guard let handle = FileHandle(forReadingAtPath: path) else {
                throw ReconcilerError(.invalidInput, "cannot read the import file \(file)")
            }
            return ImportFileReader(format: format, source: .file(handle))
        }
        var checking = try reader()
        let check = try ImportFileCheck.scan(&checking, countingDistinct: dryRun)
        let invalidStops = check.invalidCount > 0 && !skipInvalid
        if dryRun {
            // The budget is the app's; a dry run without a loadable configuration still checks the file.
            var budget = RequestBudget(environment: .production).alone
            var note = ""
            do {
                if let target = try app.loadTargets(api: api).targets.productionFirst().first { budget = target.budget.alone }
            } catch {
                note = "\n  (no app could be loaded, so the time is at Apple's default production budget: \(error))"
            }
            print(Self.dryRunSummary(check, file: file, format: format, budget: budget) + note)
            if invalidStops { throw Self.invalidRows(check) }
            return
        }
        if invalidStops {
            FileHandle.standardError.write(Data((Self.invalidLines(check) + "\n").utf8))
            throw Self.invalidRows(check)
        }
        let loaded = try app.loadTargets(api: api)
        let targets = loaded.targets.productionFirst()
        guard Set(targets.map(\.app.bundleId)).count == 1 else {
            throw ReconcilerError.configuration(
                "several apps are configured (\(Set(targets.map(\.app.bundleId)).sorted().joined(separator: ", "))): choose one with --app")
        }
        let sharing = targets.map { $0.sharing([.getTransactionHistory, .getAllSubscriptionStatuses, .lookUpOrderId]) }
        let progress = ImportProgress()
        let reporter = Task { await Self.report(progress) }
        defer { reporter.cancel() }
        let importTargets = targets.map { CustomerImport.Target(scope: $0.scope, verifier: $0.verifier, client: $0.client) }
        let configuration = CustomerImport.Configuration(refresh: refresh)
        let interrupted = ReconcilerError(.interrupted, "interrupted: run the same import again (what is complete is not read again)")
        let result = try await targets[0].callingApple {
            try await database.runWork(logger: logger, sharing: sharing, interrupted: interrupted) { database in
                try await CustomerImport(configuration: configuration, targets: importTargets, database: database)
                    .run(rows: reader, check: check, progress: progress)
            }
        }
        reporter.cancel()
        await reporter.value
        if let reportJson {
            try result.report.json().write(to: URL(fileURLWithPath: reportJson))
        }
        print(Self.summary(result, blankLines: check.blankLines))
        if let ending = result.ending { throw ending }
    }

    static func invalidRows(_ check: ImportFileCheck) -> ReconcilerError {
        ReconcilerError(
            .invalidInput,
            "\(Plural.count(check.invalidCount, "invalid row")) (first: line \(check.invalid[0].line), \(check.invalid[0].reason)); "
                + "nothing was asked of Apple: fix the file, or pass --skip-invalid to import the valid rows")
    }

    static func invalidLines(_ check: ImportFileCheck) -> String {
        var lines = check.invalid.prefix(20).map { "  line \($0.line): \($0.reason)" }
        if check.invalidCount > lines.count { lines.append("  … and \(check.invalidCount - lines.count) more") }
        return "invalid rows:\n" + lines.joined(separator: "\n")
    }

    static func dryRunSummary(
        _ check: ImportFileCheck, file: String, format: ImportFormat, budget: [AppStoreServerAPIEndpoint: Double]
    ) -> String {
        let estimate = check.estimate(budget: budget)
        var lines = ["DRY RUN (nothing was called or changed) import of \(file) (\(format.rawValue))"]
        lines.append(
            "  rows          \(check.rowsRead): \(check.validRows) valid, \(check.invalidCount) invalid; "
                + "\(Plural.count(check.blankLines, "blank line")) skipped")
        lines.append(
            "  distinct IDs  \(check.distinctTransactionIds + check.distinctOrderIds): "
                + "\(Plural.count(check.distinctTransactionIds, "transaction ID")), \(Plural.count(check.distinctOrderIds, "order ID")) alone")
        if check.invalidCount > 0 { lines.append(invalidLines(check)) }
        let requests = estimate.requests.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }
        lines.append(
            "  would take    at least \(requests.isEmpty ? "no requests" : requests.joined(separator: ", ")); "
                + "\(duration(estimate.seconds)) at the budget at most (IDs an earlier import completed take none)")
        return lines.joined(separator: "\n")
    }

    static func duration(_ seconds: Double) -> String {
        if seconds >= 3600 { return String(format: "%.1f hours", seconds / 3600) }
        if seconds >= 60 { return String(format: "%.0f minutes", seconds / 60) }
        return Plural.count(Int(seconds.rounded(.up)), "second")
    }

    static func summary(_ result: CustomerImport.Result, blankLines: Int) -> String {
        let report = result.report
        var lines = ["import (runs \(result.runIds.map(String.init).joined(separator: ", "))): \(result.ending == nil ? "DONE" : "NOT CLEAN")"]
        lines.append("  rows read     \(report.rowsRead) (\(Plural.count(blankLines, "blank line")) skipped, \(report.invalidCount) invalid)")
        lines.append(
            "  customers     \(report.customers) read; \(result.alreadyComplete) rows complete from an earlier import, "
                + "\(result.sameCustomer) naming a customer already read")
        lines.append("  purchases     \(report.purchases) found, \(report.created) created, \(report.changed) changed")
        lines.append("  not found     \(report.notFoundCount)")
        for entry in report.notFound.prefix(20) {
            lines.append("    line \(entry.line): \(entry.transactionId.map { "transactionId \($0)" } ?? "orderId \(entry.orderId ?? "")")")
        }
        let requests = report.requests.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }
        lines.append("  requests      \(requests.isEmpty ? "none" : requests.joined(separator: ", "))")
        lines.append(String(format: "  duration      %.1fs", report.durationSeconds))
        for failure in result.failures.prefix(20) {
            lines.append("  FAILED (\(failure.kind.rawValue)) line \(failure.line) \(failure.id): \(failure.error)")
        }
        return lines.joined(separator: "\n")
    }

    /// A line rewritten in place on a terminal; otherwise (cron, a pipe) a JSON line every 10 seconds.
    static func report(_ progress: ImportProgress) async {
        let terminal = ProgressReporter.stderrIsTerminal
        while !Task.isCancelled {
            try? await Task.sleep(for: terminal ? .milliseconds(500) : .seconds(10))
            guard !Task.isCancelled else { break }
            let snapshot = progress.snapshot
            if terminal {
                FileHandle.standardError.write(Data("\r\u{1B}[K\(snapshot.line())".utf8))
            } else {
                let object: [String: Any] = [
                    "message": "import progress", "rowsDone": snapshot.rowsDone, "rowsTotal": snapshot.rowsTotal, "status": snapshot.line(),
                ]
                if let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) {
                    FileHandle.standardError.write(data + Data("\n".utf8))
                }
            }
        }
        if terminal { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
    }

    /// Copies standard input to a temporary file, 64 KiB at a time.
    static func spoolStandardInput() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("reconciler-import-\(UUID().uuidString)").path
        guard FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600]),
            let output = FileHandle(forWritingAtPath: path)
        else { throw ReconcilerError(.invalidInput, "cannot copy standard input to a temporary file") }
        defer { try? output.close() }
        while let chunk = try FileHandle.standardInput.read(upToCount: 65_536), !chunk.isEmpty { try output.write(contentsOf: chunk) }
        return path
    }
}
