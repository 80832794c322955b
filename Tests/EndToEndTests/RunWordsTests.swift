import Foundation
import PostgresNIO
import ReconcilerDomain
import TestSupport
import Testing

/// What a run and `status` say, read as the on-call engineer reads them: every count means what
/// its word says, every hint works once the run has ended, every file written is named.
@Suite struct RunWordsTests {
    static let one = "com.example.one"
    static let two = "com.example.two"
    static let apps = ["--app", "\(one):1234567890:production,sandbox", "--app", "\(two):2345678901:production"]

    /// A non-renewing product without a term has `entitled: null`: the run's report (text and
    /// JSON) and `status` say how many purchases, and which setting decides it (the file's
    /// `nonRenewingTerms`, or RECONCILER_NON_RENEWING_TERMS without a file); with the terms
    /// configured they say nothing.
    @Test func aRunAndStatusSayHowManyPurchasesHaveAnUnknownEntitlementAndWhichSettingDecides() async throws {
        try await Rehearsal.with(customers: 40, seed: 91, configurationFile: true) { rehearsal in
            let file = try rehearsal.configurationFile("without-terms") { text in
                text.split(separator: "\n", omittingEmptySubsequences: false).filter { !$0.hasPrefix("nonRenewingTerms") }.joined(separator: "\n")
            }
            let reportPath = rehearsal.file("report.json")
            let run = try await rehearsal.runWindow(["--config", file, "--report-json", reportPath])
            #expect(run.status == 0, "\(run.stdout)\n\(run.stderr)")
            // What `export` shows as null once the run is done.
            let unknown = try await rehearsal.reconciler(["export", "--config", file]).stdout
                .split(separator: "\n").filter { $0.contains("\"entitled\":null") }.count
            #expect(unknown > 0, "the scenario has no non-renewing purchase")
            let setting = "nonRenewingTerms in \(file)"
            let line = "  entitled     \(unknown) purchase\(unknown == 1 ? "" : "s") with entitled unknown (null in export): non-renewing "
            #expect(run.stdout.contains(line), "\(run.stdout)")
            #expect(run.stdout.contains("without a term; set how long each lasts in \(setting)"), "\(run.stdout)")
            let json = try Rehearsal.report(reportPath)["unknownEntitlement"] as? [String: Any]
            #expect(json?["purchases"] as? Int == unknown, "\(String(describing: json))")
            #expect(json?["setting"] as? String == setting, "\(String(describing: json))")
            #expect((json?["products"] as? [String])?.isEmpty == false, "\(String(describing: json))")

            let status = try await rehearsal.reconciler(["status", "--config", file])
            #expect(status.stdout.contains("entitled: \(Self.bundleId(rehearsal)) (Production): \(unknown) purchase"), "\(status.stdout)")
            #expect(status.stdout.contains(setting), "\(status.stdout)")
            let statusJSON = try JSONSerialization.jsonObject(
                with: Data(try await rehearsal.reconciler(["status", "--config", file, "--json"]).stdout.utf8))
            let first = (statusJSON as? [[String: Any]])?.first?["unknownEntitlement"] as? [String: Any]
            #expect(first?["purchases"] as? Int == unknown, "\(String(describing: statusJSON))")

            // Without a file, the variable decides.
            var variables = try MockAppStoreProcess.reconcilerEnvironment(credentials: rehearsal.credentials)
            variables["RECONCILER_CONFIG"] = ""
            variables["RECONCILER_NON_RENEWING_TERMS"] = ""
            let plain = try await rehearsal.reconciler(["status"], environment: variables)
            #expect(plain.stdout.contains("\(unknown) purchase"), "\(plain.stdout)\n\(plain.stderr)")
            #expect(plain.stdout.contains("set how long each lasts in RECONCILER_NON_RENEWING_TERMS"), "\(plain.stdout)")

            // The mock's own file configures every term: nothing to say.
            let configured = try await rehearsal.reconciler(["status"])
            #expect(!configured.stdout.contains("entitled unknown"), "\(configured.stdout)")
            let again = try await rehearsal.runWindow()
            #expect(!again.stdout.contains("entitled unknown"), "\(again.stdout)")
        }
    }

    /// With several apps and environments, `--report-html` writes one page per app and
    /// environment, and the output names each page with the run and app it shows.
    @Test func severalAppsWriteOnePageEachNamedUnderTheirReport() async throws {
        try await Rehearsal.with(customers: 6, seed: 92, mockArguments: Self.apps, configurationFile: true) { rehearsal in
            let page = rehearsal.file("incident.html")
            let run = try await rehearsal.runWindow(["--report-html", page])
            #expect(run.status == 0, "\(run.stdout)\n\(run.stderr)")
            let sections = run.stdout.components(separatedBy: "== ").dropFirst()
            #expect(sections.count == 3, "\(run.stdout)")
            for (bundleId, environment) in [(Self.one, "Production"), (Self.one, "Sandbox"), (Self.two, "Production")] {
                let path = rehearsal.file("incident-\(bundleId)-\(environment.lowercased()).html")
                let section = sections.first { $0.hasPrefix("\(bundleId) (\(environment))") } ?? ""
                let runId = section.firstMatch(of: /reconcile run (\d+)/).map { String($0.1) } ?? "?"
                #expect(section.contains("incident report page: \(path) (run \(runId), \(bundleId) \(environment))"), "\(run.stdout)")
                let html = try String(contentsOfFile: path, encoding: .utf8)
                #expect(html.contains(bundleId), "\(path)")
            }
            #expect(!FileManager.default.fileExists(atPath: page), "the given name itself is not written with several apps")
        }
    }

    /// The hint under a report's cut list of changes names a command that works once the run has
    /// ended, and it prints every change of the run (a real run's feed rows; a dry run's report).
    @Test func theHintUnderTheChangesWorksAfterTheRun() async throws {
        try await Rehearsal.with(customers: 60, seed: 93) { rehearsal in
            let dry = try await rehearsal.runWindow(["--dry-run"])
            #expect(dry.status == 0, "\(dry.stdout)\n\(dry.stderr)")
            let real = try await rehearsal.runWindow()
            #expect(real.status == 0, "\(real.stdout)\n\(real.stderr)")
            for (output, dryRun) in [(dry.stdout, true), (real.stdout, false)] {
                let total = Int(output.firstMatch(of: #/  changed      (\d+) purchases?/#)?.1 ?? "0") ?? 0
                #expect(total > 10, "too few changes to cut the list: \(output)")
                guard let hint = output.firstMatch(of: #/    … (\d+) more: `reconciler ([^`]+)`/#) else {
                    Issue.record("no hint under the changes: \(output)")
                    continue
                }
                #expect(Int(hint.1) == total - 10)
                let result = try await rehearsal.reconciler(hint.2.split(separator: " ").map(String.init))
                #expect(result.status == 0, "reconciler \(hint.2): \(result.stderr)")
                // Every purchase the report counted is there.
                let purchases: Set<String>
                if dryRun {
                    // The changes listed under `changed` in the report `status --run` prints.
                    let lines = result.stdout.components(separatedBy: "\n").drop { !$0.hasPrefix("  changed ") }.dropFirst()
                    purchases = Set(lines.prefix { $0.hasPrefix("    ") }.compactMap { $0.firstMatch(of: #/^    (\d+)  /#).map { String($0.1) } })
                } else {
                    purchases = Set(
                        try result.stdout.split(separator: "\n").map { line in
                            let row = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] ?? [:]
                            return row["originalTransactionId"] as? String ?? "?"
                        })
                }
                #expect(purchases.count == total, "reconciler \(hint.2) shows \(purchases.count) of \(total) purchases")
            }
        }
    }

    /// "applied" counts the notifications that changed a purchase (those the change feed's
    /// purchase rows name); one whose data changed nothing is recorded only. A dry run's count of
    /// changed purchases is what the real run's feed then shows.
    @Test func appliedAndChangedCountWhatTheFeedShows() async throws {
        try await Rehearsal.with(customers: 60, seed: 94) { rehearsal in
            let reportPath = rehearsal.file("dry.json")
            let dry = try await rehearsal.runWindow(["--dry-run", "--report-json", reportPath])
            #expect(dry.status == 0, "\(dry.stdout)\n\(dry.stderr)")
            let predicted = try Rehearsal.report(reportPath)["changesTotal"] as? Int
            let realPath = rehearsal.file("real.json")
            let real = try await rehearsal.runWindow(["--report-json", realPath])
            #expect(real.status == 0, "\(real.stdout)\n\(real.stderr)")
            let report = try Rehearsal.report(realPath)
            let runId = report["runId"] as? Int ?? 0
            let rows = try await rehearsal.reconciler(["changes", "--run-id", "\(runId)", "--kind", "purchase"]).stdout
                .split(separator: "\n").map { try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] ?? [:] }
            let purchases = Set(rows.compactMap { $0["originalTransactionId"] as? String })
            #expect(report["changesTotal"] as? Int == purchases.count, "\(report["changesTotal"] ?? "?") vs the feed's \(purchases.count)")
            #expect(predicted == purchases.count, "the dry run predicted \(predicted ?? -1), the feed shows \(purchases.count)")
            // Every notification counted applied changed its purchase: the transaction that recorded
            // it wrote a purchase row of the feed for that purchase. The stored outcomes (which the
            // incident page charts) are the report's counts.
            let applied = try await rehearsal.db.count("SELECT count(*) FROM notifications WHERE run_id = \(runId) AND outcome = 'applied'")
            let changedNothing = try await rehearsal.db.count(
                """
                SELECT count(*) FROM notifications n WHERE n.run_id = \(runId) AND n.outcome = 'applied' AND NOT EXISTS (
                    SELECT 1 FROM purchase_changes c
                    WHERE c.kind = 'purchase' AND c.original_transaction_id = n.original_transaction_id AND c.bundle_id = n.bundle_id
                      AND c.environment = n.environment AND c.xid::text::numeric % 4294967296 = n.xmin::text::numeric)
                """)
            let notifications = report["notifications"] as? [String: Int] ?? [:]
            #expect(notifications["applied"] == applied, "report \(notifications), stored \(applied) applied")
            #expect(changedNothing == 0, "\(changedNothing) notifications counted applied changed no purchase")
            #expect(
                try await rehearsal.db.count("SELECT count(*) FROM notifications WHERE run_id = \(runId) AND outcome = 'recorded'")
                    == notifications["recorded"])
            let outcomes = ["applied", "stale", "recorded", "duplicate", "rejected"].map { notifications[$0] ?? 0 }.reduce(0, +)
            #expect(outcomes == notifications["seen"], "\(notifications)")
        }
    }

    /// `status` shows who holds or held a run as host and pid; `--json` keeps the whole identity.
    @Test func statusShowsTheHolderShortAndJSONInFull() async throws {
        try await Rehearsal.with(customers: 6, seed: 95) { rehearsal in
            #expect(try await rehearsal.runWindow().status == 0)
            let json = try JSONSerialization.jsonObject(with: Data(try await rehearsal.reconciler(["status", "--json"]).stdout.utf8))
            let holder = ((json as? [[String: Any]])?.first?["run"] as? [String: Any])?["holder"] as? String ?? ""
            #expect(holder.split(separator: ":").count >= 3, "\(holder)")
            let status = try await rehearsal.reconciler(["status"])
            let row = status.stdout.split(separator: "\n").first { $0.contains(" manual ") }.map(String.init) ?? ""
            #expect(row.hasSuffix("  " + ProcessIdentity.short(holder)), "\(row)")
            #expect(!row.contains(holder), "\(row)")
            #expect(row.count < 200, "\(row.count) characters: \(row)")
        }
    }

    /// With several apps, what stopped one (a key Apple refuses for it) is said once: its report's
    /// failure line, then only what the stop adds; the last line names the app instead of saying it
    /// a third time.
    @Test func whatStoppedOneOfSeveralAppsIsSaidOnce() async throws {
        try await Rehearsal.with(
            customers: 6, seed: 96, mockArguments: Self.apps + ["--unauthorized-app", Self.two], configurationFile: true
        ) { rehearsal in
            let run = try await rehearsal.runWindow()
            #expect(run.status == 1, "\(run.stdout)\n\(run.stderr)")
            let output = run.stdout + run.stderr
            #expect(output.components(separatedBy: "HTTP 401").count - 1 == 1, "\(output)")
            #expect(run.stderr.contains("Error: \(Self.two) (Production) was not recovered in full (exit 1)"), "\(run.stderr)")
        }
    }

    /// `migrate` names each migration once (no log line beside the printed one), and a command on a
    /// database not migrated yet says only to migrate: no raw PostgreSQL error before it, also from
    /// the commands that share Apple's request budget (a table of the schema).
    @Test func migrateSaysEachMigrationOnceAndAnUnmigratedDatabaseOnlyToMigrate() async throws {
        try await Rehearsal.with(customers: 3, seed: 97) { rehearsal in
            try await TestDatabase.with(migrate: false) { fresh in
                let environment = ["DATABASE_URL": fresh.url, "LOG_LEVEL": "info"]
                for command in [
                    ["repair", "--transaction-id", "2000000100000001"], ["check-webhook", "--timeout", "5"], ["detect-outage"], ["status"],
                    ["run", "--start", rehearsal.outageStart, "--end", rehearsal.outageEnd],
                ] {
                    let result = try await rehearsal.reconciler(command, environment: environment)
                    #expect(result.status == 1, "\(command): \(result.stderr)")
                    let errors = result.stderr.split(separator: "\n").filter { $0.contains("error") || $0.contains("Error") }
                    #expect(errors.count == 1, "\(command): \(result.stderr)")
                    #expect(errors.first?.hasSuffix("run `reconciler migrate` first") == true, "\(command): \(result.stderr)")
                }
                let migrate = try await rehearsal.reconciler(["migrate"], environment: environment)
                #expect(migrate.status == 0, "\(migrate.stderr)")
                let files = try FileManager.default.contentsOfDirectory(atPath: Repository.root.appendingPathComponent("migrations").path)
                    .filter { $0.hasSuffix(".sql") }
                #expect(files.count > 10)
                for file in files {
                    let mentions = (migrate.stdout + migrate.stderr).components(separatedBy: file).count - 1
                    #expect(mentions == 1, "\(file) named \(mentions) times: \(migrate.stdout)\n\(migrate.stderr)")
                }
            }
        }
    }

    static func bundleId(_ rehearsal: Rehearsal) -> String {
        rehearsal.environment["APP_STORE_BUNDLE_ID"] ?? (try? MockAppStoreProcess.reconcilerEnvironment(credentials: rehearsal.credentials))?[
            "APP_STORE_BUNDLE_ID"] ?? "?"
    }
}
