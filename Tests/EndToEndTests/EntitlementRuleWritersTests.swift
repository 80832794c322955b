import Foundation
import MockAppStore
import PostgresNIO
import Reconciler
import ReconcilerDomain
import TestSupport
import Testing

/// Every command that writes purchase state (`serve`, `repair`, `run`, `work`, `import`) judges the change
/// feed's `entitled` by the rule in the app's entry of the configuration file, as `export` does: a
/// feed consumer that grants access from `after.entitled` sees the same answer whichever process
/// wrote the row. The rule is set in the file only (no RECONCILER_* variable), and it differs from
/// the default one: the app's sandbox purchases do not entitle.
@Suite(.serialized) struct EntitlementRuleWritersTests {
    static let app = "com.example.one"

    /// One feed line, as `reconciler changes` prints it.
    struct FeedLine {
        var originalTransactionId: String
        var source: String
        var runId: Int?
        var entitled: Any?
        /// Whether the default rule (sandbox purchases entitle) would call the purchase entitled
        /// when the row was written: a subscription not revoked and not yet expired.
        var entitledByDefault: Bool

        init?(_ object: [String: Any]) {
            guard object["kind"] as? String == "purchase", let after = object["after"] as? [String: Any],
                let original = object["originalTransactionId"] as? String, let changedAt = object["changedAt"] as? String,
                let changed = Self.date(changedAt)
            else { return nil }
            originalTransactionId = original
            source = object["source"] as? String ?? ""
            runId = object["runId"] as? Int
            entitled = after["entitled"]
            let expires = after["expiresDate"] as? Int64 ?? (after["expiresDate"] as? Int).map(Int64.init)
            entitledByDefault = after["revocationDate"] is NSNull && expires.map { $0 > Int64(changed.timeIntervalSince1970 * 1000) } == true
        }

        var judgedNotEntitled: Bool { (entitled as? Bool) == false }

        /// `changedAt`, ISO 8601 with or without fractional seconds.
        static func date(_ text: String) -> Date? {
            let formatter = ISO8601DateFormatter()
            formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            return formatter.date(from: text) ?? ISO8601DateFormatter().date(from: text)
        }
    }

    static func feed(_ rehearsal: Rehearsal) async throws -> [FeedLine] {
        let changes = try await rehearsal.reconciler(["changes", "--since", "0"])
        #expect(changes.status == 0, "\(changes.stderr)")
        return try changes.stdout.split(separator: "\n").compactMap { line in
            (try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]).flatMap(FeedLine.init)
        }
    }

    /// The lines a writer wrote: some, at least one a subscription the default rule would call
    /// entitled, and each judged not entitled by the file's rule.
    /// `context` is what the writer logged, shown when it wrote nothing.
    static func expectJudgedByTheFile(_ lines: [FeedLine], writer: String, context: @autoclosure () -> String = "") {
        #expect(!lines.isEmpty, "\(writer) wrote no feed row\n\(context())")
        #expect(lines.contains { $0.entitledByDefault }, "\(writer) wrote no row of an active subscription")
        for line in lines where !line.judgedNotEntitled {
            Issue.record("\(writer) wrote \(line.originalTransactionId) as entitled \(line.entitled ?? "nil"); the file's rule says no")
        }
    }

    @Test func everyWriterJudgesEntitledByTheRuleInTheFile() async throws {
        try await Rehearsal.with(
            customers: 40, seed: 93, mockArguments: ["--app", "\(Self.app):1234567890:sandbox", "--rate-limit", "50"],
            configurationFile: true, editConfiguration: { $0 + "sandboxEntitles: false\n" }
        ) { rehearsal in
            // serve: the live notifications before the outage.
            Self.expectJudgedByTheFile(
                try await Self.feed(rehearsal).filter { $0.source == "webhook" }, writer: "serve",
                context: String(rehearsal.serve.stderr.suffix(3000)))

            // repair: one customer the outage left behind Apple.
            let orders = try await RepairTests.orders(rehearsal)
            let exported = try RepairTests.lines(try await rehearsal.export()), truth = try RepairTests.lines(try await rehearsal.truth())
            func withoutEntitled(_ line: String?) -> String? {
                line?.replacingOccurrences(of: #""entitled":(true|false|null)"#, with: "", options: .regularExpression)
            }
            let behind = try #require(
                orders.first { order in withoutEntitled(exported[order.originalTransactionId]) != withoutEntitled(truth[order.originalTransactionId])
                },
                "the outage left no customer behind")
            let repair = try await rehearsal.reconciler(["repair", "--transaction-id", behind.originalTransactionId, "--json"])
            #expect(repair.status == 0, "\(repair.stdout)\n\(repair.stderr)")
            let repairRun = try RepairTests.report(repair).runId
            Self.expectJudgedByTheFile(
                try await Self.feed(rehearsal).filter { $0.runId == Int(repairRun) }, writer: "repair",
                context:
                    "exported \(exported[behind.originalTransactionId] ?? "nothing")\ntruth \(truth[behind.originalTransactionId] ?? "nothing")\n"
                    + repair.stdout + repair.stderr)

            // run: the outage's window, whose renewals and expiries the webhook missed.
            let run = try await rehearsal.runWindow()
            #expect(run.status == 0, "\(run.stdout)\n\(run.stderr)")
            let runId = try await rehearsal.db.count("SELECT max(run_id) FROM reconcile_runs WHERE kind = 'manual'")
            Self.expectJudgedByTheFile(try await Self.feed(rehearsal).filter { $0.runId == runId }, writer: "run")

            // work: every subscription's expiry is lost from its purchase row (as a bad restore or a
            // hand edit would), and no customer's history has been read yet, so phase 2 of a run over
            // every customer (--all) writes each of them again from Apple's transaction history; the
            // run works on one customer at a time, a worker joins with four.
            try await rehearsal.db.execute("UPDATE purchases SET expires_date_ms = NULL WHERE expires_date_ms IS NOT NULL")
            try await rehearsal.db.execute("DELETE FROM history_revisions")
            try await rehearsal.setFaults(["latencyMilliseconds": 40])
            let rerun = try rehearsal.start(["run", "--start", "now-2m", "--all", "--concurrency", "1", "--gap-concurrency", "1"])
            var rerunId = 0
            try await eventually("the run's customers queued") {
                rerunId = try await rehearsal.db.count(
                    "SELECT coalesce(max(run_id), 0) FROM gap_queue WHERE status = 'pending' AND run_id > \(Int64(runId))")
                return rerunId > 0
            }
            let worker = try await rehearsal.reconciler(["work", "--run", "\(rerunId)", "--concurrency", "4"])
            #expect(worker.status == 0, "\(worker.stdout)\n\(worker.stderr)")
            let finished = try await rerun.wait()
            #expect(finished.status == 0, "\(finished.stdout)\n\(finished.stderr)")
            try await rehearsal.setFaults(["latencyMilliseconds": 0])
            let holder = try #require(
                worker.stdout.range(of: #"worker (\S+) on run"#, options: .regularExpression).map {
                    String(worker.stdout[$0].dropFirst("worker ".count).dropLast(" on run".count))
                }, "\(worker.stdout)")
            var byWorker: Set<String> = []
            let rows = try await rehearsal.db.client.query(
                """
                SELECT p.original_transaction_id FROM purchases p
                JOIN gap_queue q ON q.anchor_transaction_id = p.history_anchor_transaction_id
                WHERE q.run_id = \(Int64(rerunId)) AND q.worker = \(holder)
                """, logger: TestDatabase.logger)
            for try await (original) in rows.decode(String.self) { byWorker.insert(original) }
            let ofRerun = try await Self.feed(rehearsal).filter { $0.runId == rerunId }
            Self.expectJudgedByTheFile(ofRerun.filter { byWorker.contains($0.originalTransactionId) }, writer: "work")

            // import: every customer again, by a file of their original transaction IDs, after the same loss.
            try await rehearsal.db.execute("UPDATE purchases SET expires_date_ms = NULL WHERE expires_date_ms IS NOT NULL")
            try await rehearsal.db.execute("DELETE FROM history_revisions")
            let file = rehearsal.file("customers.csv")
            try ("transactionId\n" + Set(orders.map(\.originalTransactionId)).sorted().joined(separator: "\n") + "\n")
                .write(toFile: file, atomically: true, encoding: .utf8)
            let imported = try await rehearsal.reconciler(["import", file])
            #expect(imported.status == 0, "\(imported.stdout)\n\(imported.stderr)")
            let importRun = try await rehearsal.db.count("SELECT max(run_id) FROM reconcile_runs WHERE kind = 'import'")
            Self.expectJudgedByTheFile(
                try await Self.feed(rehearsal).filter { $0.runId == importRun }, writer: "import", context: imported.stdout + imported.stderr)

            // And export says the same as the feed's last row of each purchase.
            let exportedAfter = try RepairTests.lines(try await rehearsal.export())
            #expect(!exportedAfter.isEmpty && exportedAfter.values.allSatisfy { !$0.contains(#""entitled":true"#) })
        }
    }
}
