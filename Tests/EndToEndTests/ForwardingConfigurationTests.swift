import AppStoreServer
import Foundation
import MockAppStore
import PostgresNIO
import TestSupport
import Testing

/// Where each app's notifications are forwarded and how they are signed, the same in every
/// forwarding command (`serve`, `run`, `repair`, `forward`): each app's own `forwardTo` with its
/// own secret, or one process-wide URL for every app, never both; never unsigned unless marked.
/// Real processes (`mock-appstore` with two apps, `reconciler`), a real PostgreSQL, the apps'
/// handlers imitated by ``AppWebhookReceiver``, each checking its own secret.
@Suite(.serialized) struct ForwardingConfigurationTests {
    static let (one, two) = (EveryAppCommandsTests.one, EveryAppCommandsTests.two)

    /// The genuine notifications of the outage window Apple never delivered, of `bundleId`.
    static func undelivered(_ rehearsal: Rehearsal, of bundleId: String) async throws -> [MockAppStore.NotificationLine] {
        let formatter = ISO8601DateFormatter()
        let start = Int64(try #require(formatter.date(from: rehearsal.outageStart)).timeIntervalSince1970 * 1000)
        let end = Int64(try #require(formatter.date(from: rehearsal.outageEnd)).timeIntervalSince1970 * 1000)
        return try await rehearsal.mockNotifications().filter {
            $0.bundleId == bundleId && !$0.forged && !$0.delivered && $0.firstAttemptDate >= start && $0.firstAttemptDate < end
        }
    }

    /// Each app's `forwardTo` names where its URL and its secret are read (`urlEnv` and
    /// `secretFile` for one, `url` and `secretEnv` for two), and every forwarding command signs
    /// each app's deliveries with that app's secret: `repair` (one customer of app two), `run`
    /// (both apps), `forward` (what failed), and `serve` (what waits in the queue). The
    /// handlers refuse any delivery not signed with their own secret; none is refused.
    @Test func eachAppsDeliveriesAreSignedWithItsOwnSecretByEveryForwardingCommand() async throws {
        let (secretOne, secretTwo) = ("one-\(UUID().uuidString)", "two-\(UUID().uuidString)")
        try await AppWebhookReceiver.withRunning(.init(secret: secretOne)) { receiverOne, urlOne in
            try await AppWebhookReceiver.withRunning(.init(secret: secretTwo)) { receiverTwo, urlTwo in
                try await Rehearsal.with(customers: 8, seed: 74, mockArguments: EveryAppCommandsTests.apps, configurationFile: true) {
                    rehearsal in
                    let secretFile = rehearsal.file("one.secret")
                    try "\(secretOne)\n".write(toFile: secretFile, atomically: true, encoding: .utf8)
                    let file = try rehearsal.configurationFile("signed") { yaml in
                        EveryAppCommandsTests.adding(
                            "    forwardTo: {url: \"\(urlTwo)\", secretEnv: HOOK_TWO_SECRET}\n", toApp: Self.two,
                            in: EveryAppCommandsTests.adding(
                                "    forwardTo:\n      urlEnv: HOOK_ONE_URL\n      secretFile: \(secretFile)\n", toApp: Self.one, in: yaml))
                    }
                    let environment = ["RECONCILER_CONFIG": file, "HOOK_ONE_URL": urlOne, "HOOK_TWO_SECRET": secretTwo]
                    let (forOne, forTwo) = (try await Self.undelivered(rehearsal, of: Self.one), try await Self.undelivered(rehearsal, of: Self.two))
                    #expect(!forOne.isEmpty && !forTwo.isEmpty)

                    // repair: one customer of app two, before the run, forwards what Apple never delivered of theirs.
                    let customer = try #require(forTwo.compactMap(\.originalTransactionId).first)
                    let repair = try await rehearsal.reconciler(
                        ["repair", "--app", Self.two, "--transaction-id", customer], environment: environment)
                    #expect(repair.status == 0, "\(repair.stdout)\n\(repair.stderr)")
                    #expect(!receiverTwo.statistics.acknowledged.isEmpty, "\(repair.stdout)")

                    // run: every app's outage, app one's handler down for good.
                    receiverOne.setBehaviour(.init(status: 503))
                    let run = try await rehearsal.reconciler(
                        ["run", "--start", rehearsal.outageStart, "--end", rehearsal.outageEnd, "--forward-attempts", "1"],
                        environment: environment)
                    #expect(run.status == 0, "\(run.stdout)\n\(run.stderr)")
                    #expect(Set(receiverTwo.statistics.acknowledged.keys) == Set(forTwo.map(\.notificationUUID)))
                    #expect(receiverOne.statistics.acknowledged.isEmpty && receiverOne.statistics.failed > 0)

                    // forward: app one's handler is back.
                    receiverOne.setBehaviour(.init(status: 200))
                    let forward = try await rehearsal.reconciler(["forward", "--once", "--retry-failed"], environment: environment)
                    #expect(forward.status == 0, "\(forward.stdout)\n\(forward.stderr)")
                    #expect(Set(receiverOne.statistics.acknowledged.keys) == Set(forOne.map(\.notificationUUID)))

                    // serve: what waits in the queue (here: everything again) is delivered by serve's forwarders.
                    try await rehearsal.db.execute(
                        "UPDATE forward_queue SET status = 'pending', attempts = 0, next_attempt_at = now(), delivered_at = NULL")
                    var serveEnvironment = rehearsal.environment.merging(environment) { $1 }
                    serveEnvironment["LOG_LEVEL"] = "warning"
                    let serve = try RunningProcess(
                        "reconciler", ["serve", "--port", "\(freePort())", "--host", "127.0.0.1"], environment: serveEnvironment)
                    defer { serve.kill() }
                    try await eventually("serve delivered the queue") {
                        try await rehearsal.db.count("SELECT count(*) FROM forward_queue WHERE status <> 'delivered'") == 0
                    }
                    #expect(receiverOne.statistics.acknowledged.values.allSatisfy { $0 == 2 })
                    #expect(receiverTwo.statistics.acknowledged.values.allSatisfy { $0 == 2 })

                    #expect(receiverOne.statistics.badSignatures == 0 && receiverTwo.statistics.badSignatures == 0)
                    for output in [repair.stdout, repair.stderr, run.stdout, run.stderr, forward.stdout, forward.stderr, serve.stderr] {
                        #expect(!output.contains(secretOne) && !output.contains(secretTwo))
                    }
                }
            }
        }
    }

    /// A webhook whose deliveries would go out unsigned without being marked so is refused at the
    /// start of every forwarding command (exit 1, saying how to sign or mark it), whether it is
    /// the process-wide URL or a plain `forwardTo` URL; so is a process secret no webhook would
    /// use. `--forward-unsigned` forwards unsigned, as marked: a handler that checks the
    /// signature refuses those deliveries.
    @Test func aWebhookWithoutASecretIsRefusedUnlessMarkedUnsigned() async throws {
        try await AppWebhookReceiver.withRunning(.init(secret: "the-handlers-secret")) { receiver, url in
            try await Rehearsal.with(customers: 4, seed: 76, mockArguments: EveryAppCommandsTests.apps, configurationFile: true) { rehearsal in
                let plain = try rehearsal.configurationFile("plain") {
                    EveryAppCommandsTests.adding("    forwardTo: \(url)\n", toApp: Self.two, in: $0)
                }
                let own = try rehearsal.configurationFile("own") {
                    EveryAppCommandsTests.adding("    forwardTo: {url: \"\(url)\", secretEnv: HOOK_SECRET}\n", toApp: Self.two, in: $0)
                }
                let before = try await rehearsal.db.stateFingerprint()
                let commands = [
                    ["serve", "--port", "\(freePort())", "--host", "127.0.0.1"],
                    ["run", "--start", rehearsal.outageStart, "--end", rehearsal.outageEnd],
                    ["repair", "--app", Self.two, "--transaction-id", "2000000000000001"],
                    ["forward", "--once"],
                ]
                let cases: [(what: String, arguments: [String], environment: [String: String], expected: [String])] = [
                    ("--forward-to without a secret", ["--forward-to", url], [:], ["--forward-to", "no secret", "--forward-unsigned"]),
                    ("RECONCILER_FORWARD_TO without a secret", [], ["RECONCILER_FORWARD_TO": url], ["RECONCILER_FORWARD_TO", "no secret"]),
                    ("a plain forwardTo without a secret", [], ["RECONCILER_CONFIG": plain], ["apps[1].forwardTo in \(plain)", "secretFile"]),
                    (
                        "a process secret no webhook uses", [], ["RECONCILER_CONFIG": own, "HOOK_SECRET": "s", "RECONCILER_FORWARD_SECRET": "p"],
                        ["RECONCILER_FORWARD_SECRET would sign nothing"]
                    ),
                    (
                        "a secret and --forward-unsigned", ["--forward-to", url, "--forward-unsigned"], ["RECONCILER_FORWARD_SECRET": "p"],
                        ["RECONCILER_FORWARD_SECRET and --forward-unsigned"]
                    ),
                ]
                for arguments in commands {
                    for refused in cases {
                        let result = try await runProcess(
                            "reconciler", arguments + refused.arguments,
                            environment: rehearsal.environment.merging(refused.environment) { $1 }, timeout: .seconds(120))
                        #expect(result.status == 1, "\(arguments[0]), \(refused.what): \(result.stdout)\n\(result.stderr)")
                        for expected in refused.expected {
                            #expect(result.stderr.contains(expected), "\(arguments[0]), \(refused.what): \(result.stderr)")
                        }
                    }
                }
                #expect(try await rehearsal.db.stateFingerprint() == before)
                #expect(receiver.statistics.received == 0)

                // Marked unsigned, it forwards without a signature, which this handler refuses.
                let unsigned = try await rehearsal.reconciler(
                    [
                        "run", "--start", rehearsal.outageStart, "--end", rehearsal.outageEnd, "--app", Self.two, "--forward-to", url,
                        "--forward-unsigned", "--forward-attempts", "1",
                    ])
                #expect(unsigned.status == 0, "\(unsigned.stdout)\n\(unsigned.stderr)")
                let refused = try await Self.undelivered(rehearsal, of: Self.two).count
                #expect(refused > 0 && receiver.statistics.badSignatures == refused && receiver.statistics.acknowledged.isEmpty)
                // Signed with the handler's secret from the file's mapping, it is taken.
                let signed = try await rehearsal.reconciler(
                    ["forward", "--once", "--retry-failed"], environment: ["RECONCILER_CONFIG": own, "HOOK_SECRET": "the-handlers-secret"])
                #expect(signed.status == 0, "\(signed.stdout)\n\(signed.stderr)")
                #expect(receiver.statistics.acknowledged.count == refused && receiver.statistics.badSignatures == refused)
            }
        }
    }

    /// A leftover process-wide URL beside the file's `forwardTo` would send every app's
    /// notifications to one handler: `serve`, `run`, `repair` and `forward` each refuse to start
    /// (exit 1), naming both URLs (redacted) and where each came from, and change nothing.
    @Test func aProcessWideURLBesideAnAppsForwardToStopsEveryForwardingCommandAtStart() async throws {
        let (password, token) = ("pw-\(UUID().uuidString)", "tok-\(UUID().uuidString)")
        try await Rehearsal.with(customers: 4, seed: 75, mockArguments: EveryAppCommandsTests.apps, configurationFile: true) { rehearsal in
            let file = try rehearsal.configurationFile("both") { yaml in
                EveryAppCommandsTests.adding("    forwardTo: https://hooks:\(password)@two.internal/apple\n", toApp: Self.two, in: yaml)
            }
            let processWide = "https://all:\(password)@all.internal/apple?token=\(token)"
            let before = try await rehearsal.db.stateFingerprint()
            let commands: [(name: String, arguments: [String])] = [
                ("serve", ["serve", "--port", "\(freePort())", "--host", "127.0.0.1"]),
                ("run", ["run", "--start", rehearsal.outageStart, "--end", rehearsal.outageEnd]),
                ("repair", ["repair", "--app", Self.two, "--transaction-id", "2000000000000001"]),
                ("forward", ["forward", "--once"]),
            ]
            for (name, arguments) in commands {
                for (origin, extra, environment) in [
                    ("RECONCILER_FORWARD_TO", [], ["RECONCILER_FORWARD_TO": processWide, "RECONCILER_FORWARD_SECRET": "s"]),
                    ("--forward-to", ["--forward-to", processWide], ["RECONCILER_FORWARD_SECRET": "s"]),
                ] {
                    // Also when --app chooses an app without forwardTo: the variable is still a leftover.
                    let result = try await runProcess(
                        "reconciler", arguments + extra + (name == "repair" ? [] : ["--app", Self.one]),
                        environment: rehearsal.environment.merging(environment.merging(["RECONCILER_CONFIG": file]) { $1 }) { $1 },
                        timeout: .seconds(120))
                    #expect(result.status == 1, "\(name) with \(origin): \(result.stdout)\n\(result.stderr)")
                    for expected in [origin, "https://…@all.internal/apple?…", "apps[1].forwardTo in \(file)", "https://…@two.internal/apple"] {
                        #expect(result.stderr.contains(expected), "\(name) with \(origin): \(result.stderr)")
                    }
                    #expect(!result.stderr.contains(password) && !result.stderr.contains(token))
                }
            }
            #expect(try await rehearsal.db.stateFingerprint() == before)
            #expect(try await rehearsal.db.count("SELECT count(*) FROM reconcile_runs") == 0)
        }
    }

    /// App one (production and sandbox) forwards to three targets: one per environment, and one
    /// for every environment that takes DID_RENEW only. `run` over the outage queues each
    /// notification it recovers that Apple never delivered for every target that receives it, and
    /// each handler gets exactly its own, once (issue 37: two targets filtered by environment get
    /// only theirs).
    @Test func severalTargetsGetOnlyTheirEnvironmentsAndTypes() async throws {
        try await AppWebhookReceiver.withRunning(.init()) { production, productionURL in
            try await AppWebhookReceiver.withRunning(.init()) { sandbox, sandboxURL in
                try await AppWebhookReceiver.withRunning(.init()) { renewals, renewalsURL in
                    try await Rehearsal.with(customers: 8, seed: 74, mockArguments: EveryAppCommandsTests.apps, configurationFile: true) {
                        rehearsal in
                        let file = try rehearsal.configurationFile("targets") { yaml in
                            EveryAppCommandsTests.adding(
                                "    forwardTo:\n"
                                    + "      - {name: production, url: \"\(productionURL)\", unsigned: true, environments: [production]}\n"
                                    + "      - {name: sandbox, url: \"\(sandboxURL)\", unsigned: true, environments: [sandbox]}\n"
                                    + "      - {name: renewals, url: \"\(renewalsURL)\", unsigned: true, types: [DID_RENEW]}\n",
                                toApp: Self.one, in: yaml)
                        }
                        let forOne = try await Self.undelivered(rehearsal, of: Self.one)
                        let uuids = { (lines: [MockAppStore.NotificationLine]) in Set(lines.map(\.notificationUUID)) }
                        let (inProduction, inSandbox) = (
                            uuids(forOne.filter { $0.environment == "Production" }), uuids(forOne.filter { $0.environment == "Sandbox" })
                        )
                        let renewed = uuids(forOne.filter { $0.notificationType == "DID_RENEW" })
                        #expect(!inProduction.isEmpty && !inSandbox.isEmpty && !renewed.isEmpty, "\(forOne.map(\.notificationType))")

                        let run = try await rehearsal.reconciler(
                            ["run", "--app", Self.one, "--start", rehearsal.outageStart, "--end", rehearsal.outageEnd],
                            environment: ["RECONCILER_CONFIG": file])
                        #expect(run.status == 0, "\(run.stdout)\n\(run.stderr)")
                        #expect(Set(production.statistics.acknowledged.keys) == inProduction)
                        #expect(Set(sandbox.statistics.acknowledged.keys) == inSandbox)
                        #expect(Set(renewals.statistics.acknowledged.keys) == renewed)
                        for receiver in [production, sandbox, renewals] {
                            #expect(receiver.statistics.acknowledged.values.allSatisfy { $0 == 1 })
                        }
                    }
                }
            }
        }
    }
}
