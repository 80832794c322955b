import ArgumentParser
import Foundation
import Reconciler
import ReconcilerDomain
import ReconcilerShared
import ReconcilerStore

/// `reconciler compact-payloads`: stores the signed values written before migration 0015 the way
/// new ones are stored, in batches of short transactions.
struct CompactPayloadsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "compact-payloads",
        abstract: "Store the signed values written before this version (migration 0015) small: each header once, nothing twice.",
        discussion: """
            Migration 0015 changes how signed values are stored but rewrites none: rewriting every payload in \
            the migration's one transaction would hold the tables as long as that takes. Rows written before \
            it keep the whole JWS (`legacy`) and still rebuild, verify and forward as they are; this command \
            takes them apart as new rows are (the header stored once by its hash, the payload's JSON \
            deflated, the signature; a notification's nested transaction and renewal info beside it; a \
            transaction that a stored notification carries as a reference to it). Each value is rebuilt and \
            compared first, and one that would not rebuild byte for byte stays whole.

            It works in batches of short transactions, each writing only rows that are still legacy, so it is \
            safe beside `serve`, runs and a second compaction; stopped, it resumes where it stopped when run \
            again. Run it once after upgrading (`reconciler migrate`), then `reconciler verify-stored`. The \
            space the old payloads held is reused by new rows after VACUUM; `VACUUM FULL` (or pg_repack) gives \
            it back to the file system.

            Exit codes: 0 done (also when there was nothing to do); 1 usage, configuration or a schema that is \
            not migrated; 2 the database went away (run it again to resume).

              reconciler migrate && reconciler compact-payloads && reconciler verify-stored
            """)

    @Option(help: "Rows per transaction.") var batchSize: Int = 500

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        guard (1...10_000).contains(batchSize) else { throw ValidationError("--batch-size must be between 1 and 10000") }
    }

    func run() async throws {
        let logger = logging.makeLogger()
        let batchSize = self.batchSize
        let totals = try await database.withCurrentSchema(logger: logger) { database in
            let lastPrinted = Locked(ContinuousClock.now)
            return try await PayloadCompactor(database: database, batchSize: batchSize).compact { totals in
                let now = ContinuousClock.now
                let due = lastPrinted.withLock { last in
                    guard now - last >= .seconds(10) else { return false }
                    last = now
                    return true
                }
                if due {
                    FileHandle.standardError.write(
                        Data(
                            "compact-payloads: \(Plural.count(totals.notifications, "notification")), \(Plural.count(totals.transactions, "transaction")) so far\n"
                                .utf8))
                }
            }
        }
        print(
            "compacted \(Plural.count(totals.notifications, "notification")) (\(totals.notificationsWhole) kept whole: they would not rebuild from parts) "
                + "and \(Plural.count(totals.transactions, "transaction")) (\(totals.transactionsInNotification) now inside the notification that carried them, "
                + "\(totals.transactionsWhole) kept whole)")
    }
}
