import AppStoreServer
import ArgumentParser
import Foundation
import Logging
import Reconciler
import ReconcilerConfiguration
import ReconcilerDomain
import ReconcilerShared
import ReconcilerStore

struct StatusCommand: AsyncParsableCommand, UsesAppsOptions {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show recent reconcile runs: windows, progress and outcome.",
        discussion: """
            It lists the runs of every app and environment of the configuration file (--config, \
            RECONCILER_CONFIG), each under its own `== bundle (Environment)` header, or of the one app of the \
            APP_STORE_* variables; --app and --environment narrow it. With neither, every run stored, in one \
            table. --json prints one array of rows, newest first within each app and environment; every row \
            carries its bundleId and environment. The forward queue is one for every app (its deliveries are \
            by URL).

              reconciler status
              reconciler status --run 42        # one run in detail, with its report
              reconciler status --json
              reconciler status --app com.example.two --environment production
              reconciler status --run 42 --html run-42.html   # its incident report page
            """)

    @Option(help: "How many runs to list (per app and environment).") var limit: Int = 20
    @Option(name: .customLong("run"), help: ArgumentHelp("Show one run in detail.", valueName: "id")) var runId: Int64?
    @Flag(help: "Print JSON instead of a table.") var json = false
    @Option(help: ArgumentHelp("With --run: also write the run's incident report page, one self-contained HTML file.", valueName: "path"))
    var html: String?

    @OptionGroup var options: StoredDataOptions

    struct Row: Codable {
        /// The run's app and environment.
        var bundleId: String
        var environment: AppStoreEnvironment
        var run: RunRecord
        var shardsDone: Int
        var shardsFailed: Int
        var shardsTotal: Int
        var pages: Int
        var customers: RunLedger.QueueSummary
        /// Deliveries of the run's notifications to the app's webhook (runs with --forward-to).
        var forwarding: ForwardQueue.ForwardingSummary?
        /// Customers and shards the run gave up on (listed by `reconciler rejections`).
        var givenUp: [RunLedger.GivenUp]
        /// The purchases of the run's app and environment whose `entitled` is unknown now, and the
        /// setting that decides it.
        var unknownEntitlement: UnknownEntitlement?
        /// With `--run`: the run's report, as `run --report-json` writes it.
        var report: RunReport?
    }

    func validate() throws {
        if let html {
            guard runId != nil else { throw ValidationError("--html needs --run ID: the page shows one run") }
            try ReportPageFile.validate(html, option: "--html")
        }
    }

    func run() async throws {
        let logger = logging.makeLogger()
        // --run names one run, whatever its app; otherwise each configured app and environment's runs.
        let stored = try app.storedScope()
        let apps = try runId == nil ? stored.appsOnly() : nil
        // Each app's rule for `entitled`: the configuration's, or the variables' for every app without one.
        let scopes = stored.targets?.map(\.scope)
        let policy = stored.targets == nil ? try EntitlementOptions.policy() : nil
        try await database.withCurrentSchema(logger: logger) { database in
            let ledger = RunLedger(database: database)
            // How many purchases of each app and environment have an unknown `entitled`, counted once each.
            let unknown = UnknownEntitlements(
                scopes: scopes ?? [], otherApps: policy, setting: UnknownEntitlement.setting(configurationFile: app.configurationFile))
            // One section per app and environment, each newest first (one of every run without a configured app).
            var sections: [(app: AppTarget?, rows: [Row])] = []
            if let runId {
                guard let run = try await ledger.run(id: runId) else { throw ReconcilerError.configuration("there is no run \(runId)") }
                var row = try await row(of: run, ledger: ledger, database: database)
                row.unknownEntitlement = try await unknown.of(run, in: database)
                var report = try await ReconcileRun.report(run: run, ledger: ledger, finishedAt: run.finishedAt ?? Date())
                report.forwarding = row.forwarding
                report.unknownEntitlement = row.unknownEntitlement
                row.report = report
                sections = [(nil, [row])]
            } else {
                for target in apps.map({ $0.map(Optional.some) }) ?? [nil] {
                    var rows: [Row] = []
                    for run in try await ledger.recentRuns(limit: limit, of: target) {
                        var row = try await row(of: run, ledger: ledger, database: database)
                        row.unknownEntitlement = try await unknown.of(run, in: database)
                        rows.append(row)
                    }
                    sections.append((target, rows))
                }
            }
            let rows = sections.flatMap(\.rows)
            if json {
                if let html, let report = rows.first?.report {
                    try await ReportPageFile.write(report: report, ledger: ledger, to: html, logger: logger, announce: false)
                }
                try StandardOutput.printJSON(rows)
                return
            }
            let several = sections.count > 1
            for (target, rows) in sections {
                if several, let target { print("== \(target)") }
                printTable(rows)
                // Once per app and environment (every run of one has the same count): not under a run's report, which says it.
                if runId == nil {
                    let lines = rows.compactMap { row in row.unknownEntitlement?.line.map { "\(row.bundleId) (\(row.environment)): \($0)" } }
                    for line in Set(lines).sorted() { print("entitled: " + line) }
                }
                if several { print("") }
            }
            let queue = try await ForwardQueue(database: database).summary(runIds: nil)
            if queue.delivered + queue.pending + queue.failed > 0 {
                print("")
                print(
                    "forward queue: \(queue.delivered) delivered, \(queue.pending) pending"
                        + (queue.oldestPending.map { " (oldest queued \(ISO8601DateFormatter().string(from: $0)))" } ?? "")
                        + ", \(queue.failed) failed" + (queue.failed > 0 ? " (`reconciler forward --once --retry-failed` tries them again)" : ""))
                if queue.failed > 0, let line = ForwardQueue.unrebuildableLine(try await ForwardQueue(database: database).unrebuildable()) {
                    print(line)
                }
                // The queue keeps no URL: a forwarder given the URL of each target delivers its deliveries.
                for (target, pending) in try await ForwardQueue(database: database).waitingTargets() {
                    print(
                        "  \(pending) pending for \(target.redacted): delivered by a forwarder given that URL (an app's forwardTo, or --forward-to)")
                }
            }
            if let report = rows.first?.report {
                print("")
                print(report.humanSummary(maximumChanges: RunReport.detailedChangesLimit))
                if let html { try await ReportPageFile.write(report: report, ledger: ledger, to: html, logger: logger) }
            }
        }
    }

    /// A run as the table and `--json` show it.
    private func row(of run: RunRecord, ledger: RunLedger, database: Database) async throws -> Row {
        let shards = try await ledger.shards(runId: run.runId)
        return Row(
            bundleId: run.bundleId, environment: run.environment, run: run, shardsDone: shards.filter { $0.status == .done }.count,
            shardsFailed: shards.filter { $0.status == .failed || $0.status == .givenUp }.count, shardsTotal: shards.count,
            pages: shards.reduce(0) { $0 + $1.pagesDone }, customers: try await ledger.queueSummary(runId: run.runId),
            forwarding: run.options.forwardTo == nil
                ? nil
                : try await ForwardQueue(database: database).summary(runIds: [run.runId]),
            givenUp: try await ledger.givenUp(runId: run.runId))
    }

    /// The runs of one app and environment (or of every one), what they gave up, and the schedule's unfinished windows.
    private func printTable(_ rows: [Row]) {
        if rows.isEmpty {
            print("no runs yet")
            return
        }
        print(
            "  run  kind       status                     phase     window (UTC)                                         shards       pages  customers      started               by"
        )
        for row in rows {
            let run = row.run
            let window = "\(run.window.start) → \(run.window.end)"
            let shards = "\(row.shardsDone)/\(row.shardsTotal)" + (row.shardsFailed > 0 ? " (\(row.shardsFailed)!)" : "")
            let customers =
                "\(row.customers.done + row.customers.failed + row.customers.givenUp)/\(row.customers.total)"
                + (row.customers.failed + row.customers.givenUp > 0 ? " (\(row.customers.failed + row.customers.givenUp)!)" : "")
            let status = run.status.rawValue + (run.dryRun ? " dry" : "")
            print(
                String(
                    format: "%5lld  %@ %@ %@ %@ %@ %6d  %@ %@  %@",
                    run.runId, pad(run.kind.rawValue, 10), pad(status, 26), pad(run.phase.rawValue, 9), pad(window, 52), pad(shards, 12),
                    row.pages,
                    pad(customers, 14), pad(ISO8601DateFormatter().string(from: run.startedAt), 20), run.holder.map(ProcessIdentity.short) ?? "-"))
        }
        let givenUp = rows.flatMap(\.givenUp).filter { $0.acknowledgedAt == nil }
        if !givenUp.isEmpty {
            print("")
            print(
                "given up: \(Plural.count(givenUp.filter { $0.kind == .customer }.count, "customer")) and \(Plural.count(givenUp.filter { $0.kind == .shard }.count, "shard")) "
                    + "not acknowledged (`reconciler rejections` lists them with the reason)")
        }
        let unfinished = rows.filter { $0.run.kind == .scheduled && !$0.run.dryRun && !$0.run.status.isFinished && $0.run.status != .running }
        if !unfinished.isEmpty {
            print(
                "unfinished scheduled windows: \(unfinished.map { "run \($0.run.runId)" }.joined(separator: ", ")) "
                    + "(every `run --since-last` retries them before its newest window)")
        }
    }

    private func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }
}

/// The purchases with an unknown `entitled` of each app and environment `status` shows, counted
/// once each by the app's own rule: its configured one, or without a configuration file the
/// variables' (`otherApps`); an app the file does not configure is not judged.
private final class UnknownEntitlements {
    let scopes: [AppScope]
    let otherApps: EntitlementPolicy?
    let setting: String
    private var counted: [AppTarget: UnknownEntitlement] = [:]

    init(scopes: [AppScope], otherApps: EntitlementPolicy?, setting: String) {
        self.scopes = scopes
        self.otherApps = otherApps
        self.setting = setting
    }

    func of(_ run: RunRecord, in database: Database) async throws -> UnknownEntitlement? {
        let target = run.app
        if let known = counted[target] { return known }
        let configured = scopes.first { $0.bundleId == target.bundleId && $0.environment == target.environment }
        guard let scope = configured ?? otherApps.map({ AppScope(target: target, entitlement: $0) }) else { return nil }
        let unknown = try await UnknownEntitlement.count(of: scope, setting: setting, in: database)
        counted[target] = unknown
        return unknown
    }
}
