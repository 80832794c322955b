import Foundation
import MockAppStore
import NIOHTTP1
import PostgresNIO
import ReconcilerDomain
import ReconcilerShared
import ReconcilerStore
import TestSupport
import Testing

@testable import Reconciler

/// `reconciler repair` end to end: real processes, a real PostgreSQL, the mock App Store
/// over HTTP, after an outage the webhook missed.
@Suite(.serialized) struct RepairTests {
    static func orders(_ rehearsal: Rehearsal) async throws -> [MockOrder] {
        let body = try await HTTP.request(.GET, "\(rehearsal.mockURL)/mock/orders").body
        return try String(decoding: body, as: UTF8.self).split(separator: "\n").map { try JSONDecoder().decode(MockOrder.self, from: Data($0.utf8)) }
    }

    /// Export or truth lines by originalTransactionId.
    static func lines(_ text: String) throws -> [String: String] {
        var result: [String: String] = [:]
        for line in text.split(separator: "\n") {
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            result[object?["originalTransactionId"] as? String ?? ""] = String(line)
        }
        return result
    }

    static func report(_ result: ProcessResult) throws -> RepairReport {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return try decoder.decode(RepairReport.self, from: Data(result.stdout.utf8))
    }

    /// Repairs one customer and checks that exactly that customer now equals the truth, every
    /// other row is as it was, and every request named only that customer.
    static func repair(_ arguments: [String], account: String, in rehearsal: Rehearsal, orders: [MockOrder]) async throws -> RepairReport {
        let originals = Set(orders.filter { $0.account == account }.map(\.originalTransactionId))
        let before = try lines(try await rehearsal.export())
        try await rehearsal.resetMockStatistics()
        let result = try await rehearsal.reconciler(["repair", "--json"] + arguments)
        #expect(result.status == 0, "repair \(arguments): \(result.stderr)")
        let after = try lines(try await rehearsal.export()), truth = try lines(try await rehearsal.truth())
        for original in originals {
            #expect(after[original] == truth[original], "\(account) \(original) after repair \(arguments)")
        }
        for (original, line) in before where !originals.contains(original) {
            #expect(after[original] == line, "repair \(arguments) touched \(original) of another customer")
        }
        #expect(Set(after.keys).subtracting(before.keys).isSubset(of: originals))
        let byAccount = try await rehearsal.mockStatistics()["requestsByAccount"] as? [String: Int] ?? [:]
        #expect(Set(byAccount.keys) == [account], "requests of repair \(arguments): \(byAccount)")
        return try report(result)
    }

    /// By order ID (with a dry run first), by an older transaction ID, and by app account token:
    /// each makes exactly that customer equal the truth; a repair runs beside a `run` that holds the
    /// lease without waiting for it, and the run then ends right.
    @Test func repairFixesExactlyTheCustomerByEachSelectorAndRunsBesideARun() async throws {
        try await Rehearsal.with(customers: 60, seed: 71) { rehearsal in
            let orders = try await Self.orders(rehearsal)
            let account = Dictionary(orders.map { ($0.originalTransactionId, $0.account) }, uniquingKeysWith: { first, _ in first })
            let exported = try Self.lines(try await rehearsal.export()), truth = try Self.lines(try await rehearsal.truth())
            // Customers the outage left wrong, with what each selector needs.
            let wrong = Set(truth.filter { exported[$0.key] != $0.value }.keys)
            let wrongAccounts = Set(wrong.compactMap { account[$0] }).sorted()
            let tokenAccount = try #require(
                wrongAccounts.first { candidate in
                    wrong.contains { account[$0] == candidate && exported[$0]?.contains("\"appAccountToken\":\"") == true }
                }, "no wrong customer with a stored appAccountToken among \(wrongAccounts)")
            let others = wrongAccounts.filter { $0 != tokenAccount }
            #expect(others.count >= 3, "\(wrongAccounts)")
            let (orderAccount, transactionAccount, concurrentAccount) = (others[0], others[1], others[2])

            // By order ID: the dry run prints what the real repair then does, and changes nothing.
            let order = try #require(orders.last { $0.account == orderAccount })
            let fingerprint = try await rehearsal.db.stateFingerprint()
            let dry = try await rehearsal.reconciler(["repair", "--order-id", order.orderId, "--dry-run", "--json"])
            #expect(dry.status == 0, "\(dry.stderr)")
            #expect(try await rehearsal.db.stateFingerprint() == fingerprint)
            #expect(try await rehearsal.db.count("SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'reconciler_dry_run_%'") == 0)
            let dryReport = try Self.report(dry)
            let real = try await Self.repair(["--order-id", order.orderId], account: orderAccount, in: rehearsal, orders: orders)
            #expect(dryReport.dryRun && !real.dryRun)
            #expect(dryReport.purchases == real.purchases)
            #expect(dryReport.missedNotifications == real.missedNotifications)
            #expect(dryReport.transactionHistoryChanges == real.transactionHistoryChanges)
            #expect(dryReport.statuses == real.statuses)
            #expect(!real.changed.isEmpty)
            #expect(!real.missedNotifications.isEmpty)
            #expect(real.purchases.allSatisfy { account[$0.after.originalTransactionId] == orderAccount })
            // Repeating it finds everything stored.
            let again = try Self.report(try await rehearsal.reconciler(["repair", "--order-id", order.orderId, "--json"]))
            #expect(again.missedNotifications.isEmpty && again.changed.isEmpty)

            // By an older transaction ID of the customer (not its latest), forwarding to the app's
            // webhook what it recorded that Apple never delivered.
            let older = try #require(orders.first { $0.account == transactionAccount })
            try await AppWebhookReceiver.withRunning(.init()) { receiver, receiverURL in
                let report = try await Self.repair(
                    ["--transaction-id", older.transactionId, "--forward-to", receiverURL, "--forward-unsigned"],
                    account: transactionAccount, in: rehearsal, orders: orders)
                let undelivered = Set(report.missedNotifications.filter { !$0.deliveredByApple }.map(\.notificationUUID))
                #expect(!undelivered.isEmpty)
                #expect(Set(receiver.statistics.acknowledged.keys) == undelivered)
                #expect(report.forwarding?.delivered == undelivered.count)
            }

            // By app account token (lowercase or not), for a customer whose purchases are stored; with metrics.
            let tokenPurchase = try #require(wrong.first { account[$0] == tokenAccount && exported[$0]?.contains("\"appAccountToken\":\"") == true })
            let tokenLine = try JSONSerialization.jsonObject(with: Data(exported[tokenPurchase]!.utf8)) as? [String: Any]
            let token = try #require(tokenLine?["appAccountToken"] as? String)
            let metricsPath = rehearsal.file("repair.prom")
            _ = try await Self.repair(
                ["--app-account-token", token.uppercased(), "--metrics-file", metricsPath], account: tokenAccount,
                in: rehearsal, orders: orders)
            let metrics = try PrometheusText(parsing: try String(contentsOfFile: metricsPath, encoding: .utf8))
            #expect(metrics.value("reconciler_run_exit_code", ["kind": "repair"]) == 0)
            #expect(metrics.value("reconciler_run_status", ["kind": "repair", "status": "succeeded"]) == 1)
            // Only series labelled by kind: the file can sit beside the scheduled run's.
            #expect(metrics.samples("reconciler_run_duration_seconds").isEmpty)

            // Beside a run that holds the lease: slow answers keep the run busy while the repair works.
            try await rehearsal.setFaults(["latencyMilliseconds": 100])
            let run = try rehearsal.start([
                "run", "--start", rehearsal.outageStart, "--end", rehearsal.outageEnd, "--concurrency", "1",
                "--gap-concurrency", "1",
            ])
            try await eventually("the run to hold the lease") {
                try await rehearsal.db.count("SELECT count(*) FROM run_leases WHERE run_id IS NOT NULL AND lease_until > now()") == 1
            }
            let concurrentOrder = try #require(orders.first { $0.account == concurrentAccount })
            let beside = try await rehearsal.reconciler(["repair", "--transaction-id", concurrentOrder.originalTransactionId])
            #expect(beside.status == 0, "\(beside.stderr)")
            #expect(run.process.isRunning, "the run ended before the repair did: nothing shows the repair did not wait")
            #expect(beside.stdout.contains("SUCCEEDED"), "\(beside.stdout)")
            let ran = try await run.wait()
            #expect(ran.status == 0, "\(ran.stderr)")
            let export = try await rehearsal.export(), allTruth = try await rehearsal.truth()
            #expect(export == allTruth, "\(Rehearsal.difference(export, allTruth))")

            // Recorded like runs: in `status`, never the last finished run of the schedule.
            let status = try await rehearsal.reconciler(["status"])
            #expect(status.stdout.contains("repair"), "\(status.stdout)")
            #expect(try await rehearsal.db.count("SELECT count(*) FROM reconcile_runs WHERE kind = 'repair' AND status = 'succeeded'") == 6)
            #expect(
                try await rehearsal.db.count(
                    "SELECT count(*) FROM purchase_changes WHERE run_id IN (SELECT run_id FROM reconcile_runs WHERE kind = 'repair')") > 0)
        }
    }

    /// Each bad input gets its message and exit code, and changes nothing.
    @Test func badInputsExitWithTheirCodeAndChangeNothing() async throws {
        try await Rehearsal.with(customers: 20, seed: 72, mockArguments: ["--forged", "1"]) { rehearsal in
            let fingerprint = try await rehearsal.db.stateFingerprint()
            let order = try #require(try await Self.orders(rehearsal).first { $0.forged != true })
            let cases: [(arguments: [String], environment: [String: String], message: String)] = [
                (["--order-id", order.orderId, "--transaction-id", order.transactionId], [:], "exactly one of"),
                ([], [:], "exactly one of"),
                (["--order-id", "MQ5-Q7X!"], [:], "is not an order ID"),
                (["--transaction-id", "20000001O0"], [:], "is not a transaction ID"),
                (["--app-account-token", "not-a-uuid"], [:], "is not a UUID"),
                (["--order-id", "ZZZZZZZZZZ"], [:], "no purchase of this app"),
                (["--transaction-id", "1999999999999999"], [:], "knows no transaction ID 1999999999999999"),
                (["--app-account-token", UUID().uuidString], [:], "--order-id"),
                (["--order-id", order.orderId, "--since", "now-400d"], [:], "retention"),
                // The lookup answer is another environment's: the configuration is wrong, nothing is quarantined.
                (["--order-id", order.orderId], ["APP_STORE_ENVIRONMENT": "sandbox"], "does not belong to the configured app and environment"),
            ]
            for (arguments, environment, message) in cases {
                let result = try await rehearsal.reconciler(["repair"] + arguments, environment: environment)
                #expect(result.status == 1, "repair \(arguments): \(result.stdout) \(result.stderr)")
                #expect(result.stderr.contains(message), "repair \(arguments): \(result.stderr)")
            }
            #expect(try await rehearsal.db.stateFingerprint() == fingerprint)
            #expect(try await rehearsal.db.count("SELECT count(*) FROM reconcile_runs") == 0)
            #expect(try await rehearsal.db.count("SELECT count(*) FROM quarantined_payloads") == 0)

            // A forged signed transaction in the lookup answer: quarantined, nothing applied, exit 4.
            let forged = try await rehearsal.reconciler(["repair", "--order-id", "FORGED0000"])
            #expect(forged.status == 4, "\(forged.stdout) \(forged.stderr)")
            #expect(forged.stderr.contains("failed verification"), "\(forged.stderr)")
            #expect(try await rehearsal.db.stateFingerprint() == fingerprint)
            #expect(
                try await rehearsal.db.count("SELECT count(*) FROM quarantined_payloads WHERE source = 'order_lookup' AND reason = 'UNTRUSTED_ROOT'")
                    == 1)
            #expect(try await rehearsal.db.count("SELECT count(*) FROM reconcile_runs WHERE kind = 'repair' AND status = 'failed'") == 1)
        }
    }

    /// A repair stopped by SIGINT exits 2 (rerun it), as its help says, not 1 (a configuration to
    /// change); the rerun then finishes with 0.
    @Test func anInterruptedRepairExitsTwoAndItsRerunFinishes() async throws {
        try await Rehearsal.with(customers: 20, seed: 74) { rehearsal in
            let order = try #require(try await Self.orders(rehearsal).first)
            try await rehearsal.setFaults(["latencyMilliseconds": 400])
            let repair = try rehearsal.start(["repair", "--transaction-id", order.originalTransactionId, "--full"])
            try await eventually("the repair recorded") {
                try await rehearsal.db.count("SELECT count(*) FROM reconcile_runs WHERE kind = 'repair' AND status = 'running'") == 1
            }
            repair.signal(SIGINT)
            let interrupted = try await repair.wait(timeout: .seconds(60))
            #expect(interrupted.status == 2, "\(interrupted.stdout)\n\(interrupted.stderr)")
            #expect(interrupted.stderr.contains("interrupted"), "\(interrupted.stderr)")
            try await rehearsal.setFaults(["latencyMilliseconds": 0])
            let rerun = try await rehearsal.reconciler(["repair", "--transaction-id", order.originalTransactionId])
            #expect(rerun.status == 0, "\(rerun.stdout)\n\(rerun.stderr)")
        }
    }
}
