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
        abstract: "Remove old rows: change-feed rows, delivered forwarding rows (one option per kind, each with an age).",
        discussion: """
            Each option names one kind of row and how old a row must be to go (at least 1h, so a bare number, \
            read as milliseconds, cannot empty a table); kinds without an option are kept. Rows go in batches of \
            short transactions, so it is safe beside a run, the live webhook and forwarders; run it daily from cron.

            --changes-older-than: change-feed rows recorded longer ago, oldest first in feed order and never the \
            newest one (the rule of `changes --prune-before`, which does the same). A consumer whose position \
            was pruned must resync (`reconciler changes` exits 1 and says how).
            --delivered-older-than: forwarding rows the app acknowledged longer ago. Pending and failed \
            deliveries are never pruned.

            --dry-run prints how many rows each option would remove and removes nothing. Exit codes: 0 done; 1 \
            usage or configuration (no option, an age under 1h, the schema not migrated, no database to connect \
            to); 2 the database went away while pruning (run it again: what was removed stays removed).

              reconciler prune --changes-older-than 30d --delivered-older-than 7d --dry-run
              reconciler prune --changes-older-than 30d --delivered-older-than 7d
            """)

    @Option(help: ArgumentHelp("Remove change-feed rows recorded longer ago than this (at least 1h, e.g. 30d).", valueName: "duration"))
    var changesOlderThan: Duration?

    @Option(help: ArgumentHelp("Remove forwarding rows delivered longer ago than this (at least 1h, e.g. 7d).", valueName: "duration"))
    var deliveredOlderThan: Duration?

    @Flag(help: "Print how many rows each option would remove, and remove nothing.")
    var dryRun = false

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var logging: LoggingOptions

    /// Each part this invocation prunes, with the option that asked for it and the age given.
    private var ages: [(part: PrunePart, option: String, age: Duration)] {
        [(PrunePart.changes, "--changes-older-than", changesOlderThan), (.deliveredForwards, "--delivered-older-than", deliveredOlderThan)]
            .compactMap { part, option, age in age.map { (part, option, $0) } }
    }

    func validate() throws {
        guard !ages.isEmpty else {
            throw ValidationError("name what to prune: --changes-older-than DURATION and/or --delivered-older-than DURATION")
        }
        for (_, option, age) in ages {
            guard age >= PrunePart.minimumAge else {
                throw ValidationError("\(option): \(age.operatorText) is shorter than 1h (30d, say)")
            }
        }
    }

    func run() async throws {
        let logger = logging.makeLogger()
        let now = Timestamp.now
        let cutoffs = ages.map { part, _, age in (part, (now - age).date) }
        let dryRun = self.dryRun
        try await database.withDatabase(logger: logger) { database in
            try await Migrator().requireCurrent(database)
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
