import AppStoreServer
import Foundation
import MockAppStore
import PostgresNIO
import ReconcilerDomain
import ReconcilerShared
import TestSupport
import Testing

@testable import Reconciler
@testable import ReconcilerStore

/// `status`, `export`, `changes`, `rejections`, `forward`, `detect-outage` and
/// `migrate` cover every app and environment of the configuration file (two apps, one in both
/// environments), and `--app` and `--environment` narrow them. Real processes (`mock-appstore`,
/// `reconciler serve` taking every app on one URL, `reconciler run` over all of them), a real
/// PostgreSQL, every `reconciler` configured only by RECONCILER_CONFIG, as an operator would.
@Suite(.serialized) struct EveryAppCommandsTests {
    static let one = "com.example.one"
    static let two = "com.example.two"
    /// The mock's apps: one in production and the sandbox, two in production.
    static let apps = ["--app", "\(one):1234567890:production,sandbox", "--app", "\(two):2345678901:production"]
    static let targets: Set<String> = ["\(one)/Production", "\(one)/Sandbox", "\(two)/Production"]
    static let headers: Set<String> = ["\(one) (Production)", "\(one) (Sandbox)", "\(two) (Production)"]

    /// App one's entry in the mock's `reconciler.yaml` ends with this line.
    static let oneEnvironments = "    environments: [production, sandbox]\n"
    /// App two's whole entry in the mock's `reconciler.yaml`.
    static let twoEntry = "  - bundleId: com.example.two\n    appAppleId: 2345678901\n    environments: [production]\n"

    /// The mock's configuration without app two.
    static func withoutAppTwo(_ yaml: String) -> String {
        #expect(yaml.contains(twoEntry), "the mock's reconciler.yaml changed: \(yaml)")
        return yaml.replacingOccurrences(of: twoEntry, with: "")
    }

    /// Adds `lines` (each indented as a key of the app) to an app's entry.
    static func adding(_ lines: String, toApp app: String, in yaml: String) -> String {
        let end = app == one ? oneEnvironments : twoEntry
        #expect(yaml.contains(end), "the mock's reconciler.yaml changed: \(yaml)")
        return yaml.replacingOccurrences(of: end, with: end + lines)
    }

    static func key(_ object: [String: Any]) -> String {
        "\(object["bundleId"] as? String ?? "-")/\(object["environment"] as? String ?? "-")"
    }

    static func key(_ state: PurchaseState) -> String { "\(state.bundleId ?? "-")/\(state.environment?.rawValue ?? "-")" }

    static func jsonArray(_ text: String) throws -> [[String: Any]] {
        try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]] ?? []
    }

    static func jsonObject(_ text: String) throws -> [String: Any] {
        try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] ?? [:]
    }

    static func jsonLines(_ text: String) throws -> [[String: Any]] {
        try text.split(separator: "\n").map { try jsonObject(String($0)) }
    }

    static func states(_ text: String) throws -> [PurchaseState] {
        try text.split(separator: "\n").map { try JSONDecoder().decode(PurchaseState.self, from: Data($0.utf8)) }
    }

    /// The text under each `== bundle (Environment)` header.
    static func sections(_ text: String) -> [String: String] {
        var sections: [String: String] = [:]
        var current: String?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("== ") {
                current = String(line.dropFirst(3))
                sections[current!] = ""
            } else if let current {
                sections[current, default: ""] += line + "\n"
            }
        }
        return sections
    }

    @Test func statusListsEachAppAndEnvironmentsRunsUnderItsOwnHeader() async throws {
        try await Rehearsal.with(customers: 6, seed: 71, mockArguments: Self.apps, configurationFile: true) { rehearsal in
            let run = try await rehearsal.runWindow()
            #expect(run.status == 0, "\(run.stdout)\n\(run.stderr)")

            let json = try await rehearsal.reconciler(["status", "--json"])
            #expect(json.status == 0, "\(json.stderr)")
            var runsByTarget: [String: [Int]] = [:]
            for row in try Self.jsonArray(json.stdout) {
                let record = row["run"] as? [String: Any] ?? [:]
                #expect(Self.key(record) == Self.key(row), "a row carries its run's app and environment: \(row)")
                runsByTarget[Self.key(row), default: []].append(record["runId"] as? Int ?? -1)
            }
            #expect(Set(runsByTarget.keys) == Self.targets, "\(json.stdout)")

            // The text: each app and environment's runs under its header, and no other's.
            let text = try await rehearsal.reconciler(["status"])
            #expect(text.status == 0, "\(text.stderr)")
            let sections = Self.sections(text.stdout)
            #expect(Set(sections.keys) == Self.headers, "\(text.stdout)")
            func listed(_ runId: Int, in section: String) -> Bool {
                section.split(separator: "\n").contains { $0.hasPrefix(String(format: "%5d  ", runId)) }
            }
            for (target, runIds) in runsByTarget {
                let parts = target.split(separator: "/")
                let header = "\(parts[0]) (\(parts[1]))"
                for (other, section) in sections {
                    for runId in runIds { #expect(listed(runId, in: section) == (other == header), "run \(runId) of \(target) under \(other)") }
                }
            }

            // --app and --environment narrow it; so does a file that names fewer apps.
            let two = try Self.jsonArray(try await rehearsal.reconciler(["status", "--json", "--app", Self.two]).stdout)
            #expect(!two.isEmpty && two.allSatisfy { Self.key($0) == "\(Self.two)/Production" }, "\(two)")
            let sandbox = try Self.jsonArray(try await rehearsal.reconciler(["status", "--json", "--environment", "sandbox"]).stdout)
            #expect(!sandbox.isEmpty && sandbox.allSatisfy { Self.key($0) == "\(Self.one)/Sandbox" }, "\(sandbox)")
            let onlyOne = try rehearsal.configurationFile("only-one", Self.withoutAppTwo)
            let narrowed = try await rehearsal.reconciler(["status", "--json"], environment: ["RECONCILER_CONFIG": onlyOne])
            #expect(Set(try Self.jsonArray(narrowed.stdout).map(Self.key)) == ["\(Self.one)/Production", "\(Self.one)/Sandbox"])
            let unknown = try await rehearsal.reconciler(["status", "--app", "com.example.three"])
            #expect(unknown.status == 1 && unknown.stderr.contains("com.example.three"), "\(unknown.stderr)")
        }
    }

    /// Every configured app and environment's purchases, each `entitled` by its own app's rule:
    /// here app one's sandbox purchases do not entitle (`sandboxEntitles: false`), app two's and
    /// the production ones follow the mock's truth.
    @Test func exportCoversEveryConfiguredAppEachJudgedByItsOwnEntitlementRule() async throws {
        try await Rehearsal.with(customers: 8, seed: 72, mockArguments: Self.apps, configurationFile: true) { rehearsal in
            let run = try await rehearsal.runWindow()
            #expect(run.status == 0, "\(run.stdout)\n\(run.stderr)")
            // Each app's transaction IDs are its own here (no --shared-transaction-ids), so a request for one app's
            // customer under another app's `bid` is a 4040010 the mock counts: none, while every app's customers were asked for.
            let statistics = try await rehearsal.mockStatistics()
            #expect(statistics["crossAppRequests"] as? Int == 0, "\(statistics)")
            let byApp = statistics["apps"] as? [String: [String: Any]] ?? [:]
            for target in Self.targets {
                let requests = byApp[target]?["requests"] as? [String: Int] ?? [:]
                #expect(requests["Get Transaction History", default: 0] > 0, "\(target): \(byApp[target] ?? [:])")
            }
            let truth = try Self.states(try await rehearsal.truth())
            #expect(Set(truth.map(Self.key)) == Self.targets)
            let at = ["--at", String(Rehearsal.moment)]
            #expect(try Self.states(try await rehearsal.reconciler(["export"] + at).stdout) == truth)

            // The mock judges sandbox purchases as production ones; this file says app one's do not entitle.
            #expect(truth.contains { $0.bundleId == Self.one && $0.environment == .sandbox && $0.entitled == true })
            let file = try rehearsal.configurationFile("no-sandbox-entitlement") {
                Self.adding("    sandboxEntitles: false\n", toApp: Self.one, in: $0)
            }
            let export = try await rehearsal.reconciler(["export"] + at, environment: ["RECONCILER_CONFIG": file])
            #expect(export.status == 0, "\(export.stderr)")
            let expected = truth.map { state in
                var state = state
                if state.bundleId == Self.one, state.environment == .sandbox { state.entitled = false }
                return state
            }
            let exported = try Self.states(export.stdout)
            let expectedText = try expected.map { try $0.jsonLine() }.joined(separator: "\n")
            #expect(exported == expected, "\(Rehearsal.difference(export.stdout, expectedText))")

            // --app and --environment narrow it (--environment as before: only that environment's purchases).
            let two = try Self.states(try await rehearsal.reconciler(["export", "--app", Self.two] + at).stdout)
            #expect(!two.isEmpty && two == truth.filter { $0.bundleId == Self.two })
            let sandbox = try Self.states(try await rehearsal.reconciler(["export", "--environment", "sandbox"] + at).stdout)
            #expect(!sandbox.isEmpty && sandbox == truth.filter { $0.environment == .sandbox })
            let onlyOne = try rehearsal.configurationFile("only-one", Self.withoutAppTwo)
            let narrowed = try Self.states(try await rehearsal.reconciler(["export"] + at, environment: ["RECONCILER_CONFIG": onlyOne]).stdout)
            #expect(narrowed == truth.filter { $0.bundleId == Self.one })
        }
    }

    /// The feed of the configured apps and environments only (the live webhook wrote every app's),
    /// each line naming its app and environment; ids stay one sequence.
    @Test func changesPrintsOnlyTheConfiguredAppsChangesEachNamingItsApp() async throws {
        try await Rehearsal.with(customers: 6, seed: 73, mockArguments: Self.apps, configurationFile: true) { rehearsal in
            // Every change the live webhook wrote is readable once no transaction that began before its own runs (serve's
            // bookkeeping may): from then on, every reader sees all of them.
            let stored = try await rehearsal.db.count("SELECT count(*) FROM purchase_changes")
            try await eventually("every change readable") {
                let store = PurchaseStore(logger: TestDatabase.logger)
                return try await rehearsal.db.database.transaction { try await store.changes(after: .start, limit: 100_000, on: $0) }.changes
                    .count == stored
            }
            let all = try await rehearsal.reconciler(["changes", "--since", "0"])
            #expect(all.status == 0, "\(all.stderr)")
            let lines = try Self.jsonLines(all.stdout)
            #expect(lines.count == stored)
            #expect(Set(lines.map(Self.key)) == Self.targets)
            // A purchase row names its purchase's app; a notification row (no `after`) the app of its notification.
            for line in lines where line["kind"] as? String == "purchase" {
                #expect(Self.key(line) == Self.key(line["after"] as? [String: Any] ?? [:]), "\(line)")
            }
            #expect(lines.contains { $0["kind"] as? String == "notification" })
            for line in lines where line["kind"] as? String == "notification" {
                #expect(Self.targets.contains(Self.key(line)) && line["after"] is NSNull, "\(line)")
            }
            func ids(_ lines: [[String: Any]]) -> [Int] { lines.map { $0["changeId"] as? Int ?? -1 } }

            let onlyOne = try rehearsal.configurationFile("only-one", Self.withoutAppTwo)
            let narrowed = try Self.jsonLines(
                try await rehearsal.reconciler(["changes", "--since", "0"], environment: ["RECONCILER_CONFIG": onlyOne]).stdout)
            #expect(ids(narrowed) == ids(lines.filter { $0["bundleId"] as? String == Self.one }))
            let two = try Self.jsonLines(try await rehearsal.reconciler(["changes", "--since", "0", "--app", Self.two]).stdout)
            #expect(!two.isEmpty && ids(two) == ids(lines.filter { $0["bundleId"] as? String == Self.two }))
            let sandbox = try Self.jsonLines(try await rehearsal.reconciler(["changes", "--since", "0", "--environment", "sandbox"]).stdout)
            #expect(!sandbox.isEmpty && ids(sandbox) == ids(lines.filter { $0["environment"] as? String == "Sandbox" }))
            // A consumer of one app resumes after its own last id.
            let resumeAt = try #require(ids(two).first)
            let resumed = try Self.jsonLines(
                try await rehearsal.reconciler(["changes", "--since", String(resumeAt), "--app", Self.two]).stdout)
            #expect(ids(resumed) == Array(ids(two).dropFirst()))
        }
    }

    /// The quarantine and the given-up customers of every configured app and environment, each
    /// item naming its app; `--ack` finds the one app a value matches in, and asks for `--app`
    /// when it matches in two.
    @Test func rejectionsListsAndAcknowledgesAcrossTheConfiguredApps() async throws {
        let directory = try TemporaryDirectory.create("every-app")
        defer { directory.remove() }
        let file = directory.file("reconciler.yaml")
        try """
        key: {id: KEY1234567, issuer: 57246542-96fe-1a63-e053-0824d011072a, privateKeyPath: \(directory.path)/AuthKey.p8}
        apps:
          - bundleId: \(Self.one)
            appAppleId: 1234567890
            environments: [production, sandbox]
          - bundleId: \(Self.two)
            appAppleId: 2345678901
            environments: [production]
        """.write(toFile: file, atomically: true, encoding: .utf8)
        try await TestDatabase.with { db in
            let ledger = RunLedger(database: db.database)
            let app = try TestApp()
            let stranger = try SigningCertificateAuthority()
            let verifier = try SignedDataVerifier(configuration: app.verifierConfiguration)
            var hashes: [String: String] = [:]
            var uuids: [String: String] = [:]
            // One forged payload quarantined by a run of each app and environment, and of an app not configured.
            let seeded: [(bundleId: String, environment: String)] = [
                (Self.one, "Production"), (Self.one, "Sandbox"), (Self.two, "Production"), ("com.example.three", "Production"),
            ]
            var runs: [String: Int64] = [:]
            for (bundleId, environment) in seeded {
                let key = "\(bundleId)/\(environment)"
                let run = try await ledger.createRun(
                    kind: .manual, app: AppTarget(bundleId: bundleId, environment: AppStoreEnvironment(rawValue: environment)),
                    window: TimeWindow(milliseconds: 0..<1), dryRun: false,
                    options: .init(),
                    shards: [], holder: "test")
                runs[key] = run.runId
                let uuid = UUID().uuidString.lowercased()
                let forged = try app.notification(.didRenew, uuid: uuid, signedDate: app.start, signer: stranger.signer)
                let error = await #expect(throws: VerificationError.self) { try await verifier.verifyAndDecodeNotification(forged) }
                let rejection = Rejection(source: .notificationHistory, signedValue: forged, error: try #require(error))
                _ = try await db.database.transaction { connection in
                    try await ledger.quarantine(
                        [rejection], runId: run.runId, app: run.app, dryRun: false, on: connection)
                }
                (hashes[key], uuids[key]) = (rejection.payloadSHA256, uuid)
            }
            // The same customer given up in app one and app two (the mock's --shared-transaction-ids), another in one's sandbox.
            for (key, subject) in [
                ("\(Self.one)/Production", "2000000000000001"), ("\(Self.two)/Production", "2000000000000001"),
                ("\(Self.one)/Sandbox", "2000000000000002"),
            ] {
                let runId = try #require(runs[key])
                try await db.database.transaction { connection in
                    try await ledger.recordGivenUp(
                        runId: runId, kind: .customer, subject: subject, failureKind: .permanent, reason: "refused", failures: 1, on: connection)
                }
            }
            let environment = ["DATABASE_URL": db.url, "LOG_LEVEL": "warning", "RECONCILER_CONFIG": file]
            func rejections(_ arguments: [String]) async throws -> ProcessResult {
                try await runProcess("reconciler", ["rejections"] + arguments, environment: environment)
            }

            let json = try await rejections(["--json"])
            #expect(json.status == 0, "\(json.stderr)")
            let entries = try Self.jsonArray(json.stdout)
            let payloads = entries.filter { $0["kind"] as? String == "payload" }
            #expect(
                Set(payloads.map { "\(Self.key($0)) \($0["payloadSHA256"] as? String ?? "")" }) == Set(Self.targets.map { "\($0) \(hashes[$0]!)" }))
            let givenUp = entries.filter { $0["kind"] as? String == "customer" }
            #expect(
                Set(givenUp.map { "\(Self.key($0)) \($0["subject"] as? String ?? "")" }) == [
                    "\(Self.one)/Production 2000000000000001", "\(Self.two)/Production 2000000000000001", "\(Self.one)/Sandbox 2000000000000002",
                ])
            let text = try await rejections([])
            #expect(Set(Self.sections(text.stdout).keys) == Self.headers, "\(text.stdout)")
            #expect(Self.sections(text.stdout)["\(Self.two) (Production)"]?.contains(String(hashes["\(Self.two)/Production"]!.prefix(16))) == true)
            let onlyTwo = try Self.jsonArray(try await rejections(["--json", "--app", Self.two]).stdout)
            #expect(onlyTwo.count == 2 && onlyTwo.allSatisfy { Self.key($0) == "\(Self.two)/Production" }, "\(onlyTwo)")

            func acknowledged() async throws -> Set<String> {
                Set(
                    try await db.strings(
                        """
                        SELECT bundle_id || '/' || environment || ' ' || payload_sha256 FROM quarantined_payloads WHERE acknowledged_at IS NOT NULL
                        UNION ALL SELECT bundle_id || '/' || environment || ' ' || subject FROM given_up WHERE acknowledged_at IS NOT NULL
                        """))
            }
            // A payload's hash names it in its own app and environment.
            let sandboxHash = hashes["\(Self.one)/Sandbox"]!
            let payload = try await rejections(["--ack", String(sandboxHash.prefix(12)), "--note", "forged"])
            #expect(payload.status == 0, "\(payload.stderr)")
            #expect(try await acknowledged() == ["\(Self.one)/Sandbox \(sandboxHash)"])
            // A customer given up in two apps: nothing is acknowledged until --app chooses.
            let ambiguous = try await rejections(["--ack", "2000000000000001"])
            #expect(ambiguous.status == 1 && ambiguous.stderr.contains("--app"), "\(ambiguous.stderr)")
            #expect(try await acknowledged() == ["\(Self.one)/Sandbox \(sandboxHash)"])
            let chosen = try await rejections(["--ack", "2000000000000001", "--app", Self.two])
            #expect(chosen.status == 0, "\(chosen.stderr)")
            #expect(try await acknowledged() == ["\(Self.one)/Sandbox \(sandboxHash)", "\(Self.two)/Production 2000000000000001"])
            // An app the file does not configure is not looked at.
            let unconfigured = try await rejections(["--ack", uuids["com.example.three/Production"]!])
            #expect(unconfigured.status == 1, "\(unconfigured.stdout)")
            #expect(try await acknowledged().count == 2)
        }
    }

    /// Each app's queued deliveries go to its own webhook (`forwardTo` in the file); `--app`
    /// chooses whose.
    @Test func forwardDeliversEachAppsQueueToItsOwnWebhook() async throws {
        try await AppWebhookReceiver.withRunning(.init()) { receiverOne, urlOne in
            try await AppWebhookReceiver.withRunning(.init()) { receiverTwo, urlTwo in
                try await Rehearsal.with(customers: 8, seed: 74, mockArguments: Self.apps, configurationFile: true) { rehearsal in
                    let file = try rehearsal.configurationFile("webhooks") { yaml in
                        Self.adding(
                            "    forwardTo: {url: \"\(urlTwo)\", unsigned: true}\n", toApp: Self.two,
                            in: Self.adding("    forwardTo: {url: \"\(urlOne)\", unsigned: true}\n", toApp: Self.one, in: yaml))
                    }
                    // Both apps are down while the run queues what Apple did not deliver: each delivery fails once, for good.
                    receiverOne.setBehaviour(.init(status: 503))
                    receiverTwo.setBehaviour(.init(status: 503))
                    let run = try await rehearsal.reconciler(
                        ["run", "--start", rehearsal.outageStart, "--end", rehearsal.outageEnd, "--forward-attempts", "1"],
                        environment: ["RECONCILER_CONFIG": file])
                    #expect(run.status == 0, "\(run.stdout)\n\(run.stderr)")

                    let notifications = try await rehearsal.mockNotifications()
                    let formatter = ISO8601DateFormatter()
                    let start = Int64(try #require(formatter.date(from: rehearsal.outageStart)).timeIntervalSince1970 * 1000)
                    let end = Int64(try #require(formatter.date(from: rehearsal.outageEnd)).timeIntervalSince1970 * 1000)
                    let outage = notifications.filter { !$0.forged && !$0.delivered && $0.firstAttemptDate >= start && $0.firstAttemptDate < end }
                    let forOne = Set(outage.filter { $0.bundleId == Self.one }.map(\.notificationUUID))
                    let forTwo = Set(outage.filter { $0.bundleId == Self.two }.map(\.notificationUUID))
                    #expect(!forTwo.isEmpty && outage.contains { $0.bundleId == Self.one && $0.environment == "Sandbox" })
                    #expect(try await rehearsal.db.count("SELECT count(*) FROM forward_queue WHERE status = 'failed'") == outage.count)
                    receiverOne.setBehaviour(.init(status: 200))
                    receiverTwo.setBehaviour(.init(status: 200))

                    let justTwo = try await rehearsal.reconciler(
                        ["forward", "--once", "--retry-failed", "--app", Self.two], environment: ["RECONCILER_CONFIG": file])
                    #expect(justTwo.status == 0, "\(justTwo.stdout)\n\(justTwo.stderr)")
                    #expect(Set(receiverTwo.statistics.acknowledged.keys) == forTwo)
                    #expect(receiverOne.statistics.acknowledged.isEmpty)

                    let every = try await rehearsal.reconciler(["forward", "--once", "--retry-failed"], environment: ["RECONCILER_CONFIG": file])
                    #expect(every.status == 0, "\(every.stdout)\n\(every.stderr)")
                    #expect(Set(receiverOne.statistics.acknowledged.keys) == forOne)
                    #expect(Set(receiverTwo.statistics.acknowledged.keys) == forTwo)
                    #expect((Array(receiverOne.statistics.acknowledged.values) + receiverTwo.statistics.acknowledged.values).allSatisfy { $0 == 1 })
                    #expect(try await rehearsal.db.count("SELECT count(*) FROM forward_queue WHERE status <> 'delivered'") == 0)
                }
            }
        }
    }

    /// Every configured app and environment's failed deliveries, `{"targets": [...]}` with several;
    /// a key Apple refuses for one app (401) is that app's configuration error, and the others go on.
    @Test func detectOutageLooksAtEveryConfiguredAppAndEnvironment() async throws {
        try await Rehearsal.with(
            customers: 6, seed: 75, mockArguments: Self.apps + ["--unauthorized-app", Self.two], configurationFile: true
        ) { rehearsal in
            let detect = try await rehearsal.reconciler(["detect-outage", "--since", "1d", "--json"])
            #expect(detect.status == 1, "app two's key is refused: \(detect.stderr)")
            let targets = try Self.jsonObject(detect.stdout)["targets"] as? [[String: Any]] ?? []
            #expect(Set(targets.map(Self.key)) == Self.targets, "\(detect.stdout)")
            for target in targets {
                if target["bundleId"] as? String == Self.two {
                    #expect(target["exitCode"] as? Int == 1 && (target["error"] as? String)?.isEmpty == false, "\(target)")
                } else {
                    #expect((target["windows"] as? [Any])?.isEmpty == false, "\(target)")
                }
            }

            let text = try await rehearsal.reconciler(["detect-outage", "--since", "1d"])
            #expect(text.status == 1)
            let sections = Self.sections(text.stdout)
            #expect(Set(sections.keys) == Self.headers, "\(text.stdout)")
            let sandbox = sections["\(Self.one) (Sandbox)"] ?? ""
            #expect(sandbox.contains("the sandbox does not retry") && sandbox.contains("--app \(Self.one) --environment sandbox"), "\(sandbox)")
            #expect(sections["\(Self.two) (Production)"]?.contains("not checked") == true, "\(text.stdout)")

            // --app narrows it: one app in both environments, all well.
            let one = try await rehearsal.reconciler(["detect-outage", "--since", "1d", "--json", "--app", Self.one])
            #expect(one.status == 0, "\(one.stderr)")
            #expect(
                Set((try Self.jsonObject(one.stdout)["targets"] as? [[String: Any]] ?? []).map(Self.key)) == [
                    "\(Self.one)/Production", "\(Self.one)/Sandbox",
                ])
            // One app and environment: the one-app object, as before.
            let single = try Self.jsonObject(
                try await rehearsal.reconciler(["detect-outage", "--since", "1d", "--json", "--app", Self.one, "--environment", "sandbox"]).stdout)
            #expect(single["targets"] == nil && single["environment"] as? String == "Sandbox" && (single["windows"] as? [Any])?.isEmpty == false)
        }
    }

    /// `--app` alone, for an app in both environments, as `repair` takes it: each environment's
    /// webhook is checked (each has its own URL in App Store Connect), production first, under
    /// its header; `--environment` narrows it to one, printed as before.
    @Test func checkWebhookTakesAnAppAloneAndChecksEachOfItsEnvironments() async throws {
        try await Rehearsal.with(customers: 4, seed: 77, mockArguments: Self.apps, configurationFile: true) { rehearsal in
            let check = try await rehearsal.reconciler(["check-webhook", "--app", Self.one])
            #expect(check.status == 0, "\(check.stdout)\n\(check.stderr)")
            let sections = Self.sections(check.stdout)
            #expect(check.stdout.hasPrefix("== \(Self.one) (Production)\n"), "\(check.stdout)")
            #expect(Set(sections.keys) == ["\(Self.one) (Production)", "\(Self.one) (Sandbox)"], "\(check.stdout)")
            for (header, section) in sections {
                #expect(section.hasPrefix("SUCCESS: TEST notification") && section.contains("stored by the webhook"), "\(header): \(section)")
            }
            for environment in ["Production", "Sandbox"] {
                let stored = try await rehearsal.db.count(
                    "SELECT count(*) FROM notifications WHERE notification_type = 'TEST' AND bundle_id = \(Self.one) AND environment = \(environment)"
                )
                #expect(stored == 1, "\(environment)")
            }

            let sandbox = try await rehearsal.reconciler(["check-webhook", "--app", Self.one, "--environment", "sandbox"])
            #expect(sandbox.status == 0, "\(sandbox.stdout)\n\(sandbox.stderr)")
            #expect(sandbox.stdout.hasPrefix("SUCCESS: TEST notification") && !sandbox.stdout.contains("== "), "\(sandbox.stdout)")

            // doctor --send-test follows the same round trip, one line per app and environment.
            let doctor = try await rehearsal.reconciler(["doctor", "--send-test", "--app", Self.one, "--json"])
            let items = try JSONSerialization.jsonObject(with: Data(doctor.stdout.utf8)) as? [[String: Any]] ?? []
            let tests = items.filter { $0["check"] as? String == "test-notification" }
            #expect(tests.map { $0["environment"] as? String } == ["Production", "Sandbox"], "\(doctor.stdout)\n\(doctor.stderr)")
            for test in tests {
                #expect(test["status"] as? String == "ok", "\(test)")
                #expect((test["detail"] as? String ?? "").contains("stored by the webhook"), "\(test)")
            }
        }
    }

    /// Migration 0013 gives rows whose signed data names no app the one configured bundle id (a
    /// file of one app, in both environments, or APP_STORE_BUNDLE_ID); a file of two apps leaves
    /// the migration refusing, as without a configuration.
    @Test func migrateGivesRowsWithoutAnAppTheOneConfiguredBundleId() async throws {
        let directory = try TemporaryDirectory.create("every-app")
        defer { directory.remove() }
        func file(_ name: String, apps: String) throws -> String {
            let path = directory.file("\(name).yaml")
            try """
            key: {id: KEY1234567, issuer: 57246542-96fe-1a63-e053-0824d011072a, privateKeyPath: \(directory.path)/AuthKey.p8}
            apps:
            \(apps)
            """.write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }
        let oneApp = try file("one", apps: "  - {bundleId: \(Self.one), appAppleId: 1234567890, environments: [production, sandbox]}")
        let twoApps = try file(
            "two",
            apps: """
                  - {bundleId: \(Self.one), appAppleId: 1234567890, environments: [production, sandbox]}
                  - {bundleId: \(Self.two), appAppleId: 2345678901}
                """)
        /// A database of one app before migration 0013, with a purchase whose signed data names no app.
        func orphanDatabase(_ db: TestDatabase) async throws {
            try await Migrator(migrations: Migration.embedded.filter { $0.version < 13 }).migrate(db.client, logger: TestDatabase.logger)
            try await db.execute("INSERT INTO purchases (original_transaction_id, environment) VALUES ('7001', 'Production')")
        }
        func migrate(_ db: TestDatabase, _ environment: [String: String]) async throws -> ProcessResult {
            try await runProcess(
                "reconciler", ["migrate"], environment: ["DATABASE_URL": db.url, "LOG_LEVEL": "warning"].merging(environment) { $1 })
        }
        try await TestDatabase.with(migrate: false) { db in
            try await orphanDatabase(db)
            let several = try await migrate(db, ["RECONCILER_CONFIG": twoApps])
            #expect(several.status == 1 && several.stderr.contains("carry no bundle ID"), "\(several.stderr)")
            #expect(try await db.count("SELECT count(*) FROM schema_migrations WHERE version = 13") == 0)
            let one = try await migrate(db, ["RECONCILER_CONFIG": oneApp])
            #expect(one.status == 0, "\(one.stderr)")
            #expect(try await db.strings("SELECT bundle_id FROM purchases") == [Self.one])
        }
        try await TestDatabase.with(migrate: false) { db in
            try await orphanDatabase(db)
            let variables = try await migrate(db, ["APP_STORE_BUNDLE_ID": "com.example.single", "APP_STORE_ENVIRONMENT": "production"])
            #expect(variables.status == 0, "\(variables.stderr)")
            #expect(try await db.strings("SELECT bundle_id FROM purchases") == ["com.example.single"])
        }
    }
}
