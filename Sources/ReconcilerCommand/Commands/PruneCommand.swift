import ArgumentParser
import Foundation
import Logging
import Reconciler
import ReconcilerDomain
import ReconcilerShared
import ReconcilerStore

/// `reconciler prune`: removes old rows, one option per kind (``PrunePart``), each with its own age.
/// A new part is a case of ``PrunePart``, an option here, and one entry of ``ages``.
struct PruneCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "prune",
        abstract:
            "Remove old rows: change-feed rows, delivered forwarding rows, raw signed payloads, finished runs' rows, acknowledged quarantine (one option per kind, each with an age).",
        discussion: """
            Each option names one kind of row and how old a row must be to go (at least 1h, so a bare number, \
            read as milliseconds, cannot empty a table); kinds without an option are kept. Rows go in batches of \
            short transactions, so it is safe beside a run, the live webhook and forwarders; run it daily from cron.

            --changes-older-than: change-feed rows recorded longer ago, oldest first in feed order and never the \
            newest one (the rule of `changes --prune-before`, which does the same). A consumer whose position \
            was pruned must resync (`reconciler changes` exits 1 and says how).
            --delivered-older-than: forwarding rows the app acknowledged longer ago. Pending and failed \
            deliveries are never pruned.
            --payloads-older-than (opt-in; at least 210d, Apple's 180 days of notification history and a margin): \
            the raw signed payloads of notifications received and signed longer ago, and of transactions \
            written and signed longer ago. What they decoded to stays (purchases, transactions, the \
            notification's columns and outcome), and so does the SHA-256 of each payload (for a row stored \
            before `compact-payloads` took it apart, computed as it is pruned), so a copy kept elsewhere can \
            still be matched; the JWS itself is gone (`verify-stored` counts it as pruned). A \
            notification with a delivery not yet delivered, or named by a quarantined payload nobody \
            acknowledged, keeps its payload. After Apple's retention the stored payload is the only evidence \
            a purchase happened: prune it only if you keep that evidence elsewhere or do not need it.
            --finished-runs-older-than: the shards, the customer queue and the API timeline of runs that \
            finished (succeeded, with rejections, or lost) longer ago. The run, its stored report, counts, \
            changes and rejections stay; its report page then has no timeline.
            --acknowledged-quarantine-older-than: quarantined payloads acknowledged (`rejections --ack`) longer ago.

            --dry-run prints how many rows each option would remove and removes nothing. Exit codes: 0 done; 1 \
            usage or configuration (no option, an age under its minimum, the schema not migrated, no database to \
            connect to); 2 the database went away while pruning (run it again: what was removed stays removed).

              reconciler prune --changes-older-than 30d --delivered-older-than 7d \\
                  --finished-runs-older-than 30d --dry-run
              reconciler prune --changes-older-than 30d --delivered-older-than 7d \\
                  --finished-runs-older-than 30d --acknowledged-quarantine-older-than 90d
              reconciler prune --payloads-older-than 400d
            """)

    @Option(help: ArgumentHelp("Remove change-feed rows recorded longer ago than this (at least 1h, e.g. 30d).", valueName: "duration"))
    var changesOlderThan: Duration?

    @Option(help: ArgumentHelp("Remove forwarding rows delivered longer ago than this (at least 1h, e.g. 7d).", valueName: "duration"))
    var deliveredOlderThan: Duration?

    @Option(
        help: ArgumentHelp(
            "Remove the raw signed payloads of notifications and transactions older than this (opt-in; at least 210d).", valueName: "duration"))
    var payloadsOlderThan: Duration?

    @Option(
        help: ArgumentHelp("Remove the shards, queue and timeline rows of runs finished longer ago than this (at least 1h).", valueName: "duration"))
    var finishedRunsOlderThan: Duration?

    @Option(help: ArgumentHelp("Remove quarantined payloads acknowledged longer ago than this (at least 1h).", valueName: "duration"))
    var acknowledgedQuarantineOlderThan: Duration?

    @Flag(help: "Print how many rows each option would remove, and remove nothing.")
    var dryRun = false

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var logging: LoggingOptions

    /// Each part this invocation prunes, with the option that asked for it and the age given.
    private var ages: [(part: PrunePart, option: String, age: Duration)] {
        [
            (PrunePart.changes, "--changes-older-than", changesOlderThan), (.deliveredForwards, "--delivered-older-than", deliveredOlderThan),
            (.payloads, "--payloads-older-than", payloadsOlderThan), (.finishedRuns, "--finished-runs-older-than", finishedRunsOlderThan),
            (.acknowledgedQuarantine, "--acknowledged-quarantine-older-than", acknowledgedQuarantineOlderThan),
        ]
        .compactMap { part, option, age in age.map { (part, option, $0) } }
    }

    func validate() throws {
        guard !ages.isEmpty else {
            throw ValidationError(
                "name what to prune: --changes-older-than, --delivered-older-than, --payloads-older-than, --finished-runs-older-than "
                    + "and/or --acknowledged-quarantine-older-than, each with a DURATION")
        }
        for (part, option, age) in ages {
            guard age >= part.minimumAge else {
                let why = part == .payloads ? " (Apple keeps 180 days of notification history; payloads stay that long and 30 days more)" : ""
                throw ValidationError(
                    "\(option): \(age.operatorText) is shorter than \(part.minimumAge.operatorText)\(why); \(part == .payloads ? "400d" : "30d"), say"
                )
            }
        }
    }

    func run() async throws {
        let logger = logging.makeLogger()
        let now = Timestamp.now
        let cutoffs = ages.map { part, _, age in (part, (now - age).date) }
        let dryRun = self.dryRun
        try await database.withCurrentSchema(logger: logger) { database in
            let pruner = Pruner(database: database)
            for (part, cutoff) in cutoffs {
                if dryRun {
                    print("would prune \(try await pruner.count(part, before: cutoff)) \(part.describe(cutoff: cutoff))")
                } else {
                    print("pruned \(try await pruner.prune(part, before: cutoff)) \(part.describe(cutoff: cutoff))")
                }
            }
        }
    }
}
