import AppStoreServer
import ArgumentParser
import Foundation
import Logging
import Reconciler
import ReconcilerDomain
import ReconcilerShared
import ReconcilerStore

struct ChangesCommand: AsyncParsableCommand, UsesAppsOptions {
    static let configuration = CommandConfiguration(
        commandName: "changes",
        abstract: "Print the change feed: every change of a purchase, in commit order, as JSON lines.",
        discussion: """
            Every purchase change (from the webhook, a replay, the gap fill) writes one row of kind `purchase` in \
            the same transaction as the change; every notification recorded for the first time that changed no \
            purchase (entitled and lastSignedDate aside), or that Apple set a deadline for (CONSUMPTION_REQUEST), \
            writes one of kind `notification`. Each line has every key: changeId, kind, originalTransactionId, \
            bundleId, environment, appAccountToken, source (webhook, history, transaction_history, status_refresh, app), \
            notificationUUID, runId, before and after (the `export` shape, entitled as of the change; before is \
            null for a new purchase; both null on notification rows), changedAt (ISO 8601), and notificationType, \
            subtype, transactionId, signedDate and respondBy (the deadline for an answer, UNIX ms; on purchase \
            rows only notificationType and subtype, of the notification that caused the change, null for \
            transaction_history and status_refresh), and appUserId (the app's own ID for the customer, from \
            `reconciler import`; null when unknown). --kind purchase or --kind notification prints one kind. Lines come in commit order: a change is printed only once no transaction that could \
            still commit an earlier one is running, so resuming after the last id you processed misses nothing.

            It prints the changes of every app and environment of the configuration file (--config, \
            RECONCILER_CONFIG), or of the one app of the APP_STORE_* variables; --app and --environment narrow \
            it. With neither, every change stored. Ids are one sequence for every app: a consumer of one app \
            resumes --since its own last id.

            The consumer pattern: process each line, and store its changeId in your own database in the same \
            transaction as the effect; restart with --since that id. Without one transaction, a crash between \
            the effect and storing the id repeats that change (at-least-once): make the effect idempotent, for \
            example by applying the `after` state, which is the whole state of the purchase.

              # the whole feed, then exit
              reconciler changes --since 0 > feed.jsonl
              reconciler changes --since "$LAST_ID" --follow | my-consumer
              reconciler changes --app com.example.two --environment production \\
                  --since "$LAST_ID" --follow
              reconciler changes --app-account-token 6f1c...-...-... --since 0
              # every change a run made (its report lists 1,000)
              reconciler changes --run-id 42
              # only notifications that changed no purchase
              reconciler changes --since "$LAST_ID" --kind notification
              reconciler changes --newest            # the newest id, for a new consumer
              # retention: reconciler prune --changes-older-than 30d
              reconciler changes --prune-before 30d

            --follow stays connected: it waits on LISTEN reconciler_changes (a connection of its own, so point \
            it at PostgreSQL or a session-mode pool, not PgBouncer in transaction mode, where it only polls) and \
            reads again every --poll-interval as well, since a change held back by an older transaction becomes \
            readable without a new notification. It rides out a database outage of any length; SIGTERM or \
            SIGINT end it after the line in progress, with exit 0. A reader that goes away (a closed pipe: \
            `changes | head -1`, a consumer that died) ends it quietly with exit 0, at the next line or within \
            5 s while nothing is printed, and so releases its database connections.

            --since ID when ID is no longer in the feed (pruned) exits 1 and prints nothing: the consumer may \
            have missed changes and must resync: take `reconciler changes --newest`, load `reconciler export`, \
            then follow --since the id taken. --since 0 starts from the oldest change still kept. A reader \
            that is running (with or without --follow) when a prune removes changes it has not printed yet \
            ends the same way, exit 1, after the last change it printed.

            --prune-before DURATION deletes the changes recorded longer ago than that (at least 1h, so a \
            bare number, read as milliseconds, cannot empty the feed), oldest first and in feed order, and \
            never the newest change, so a consumer that is caught up can resume after a quiet spell. It is \
            `reconciler prune --changes-older-than DURATION`, which also prunes other tables.
            """)

    @Option(help: ArgumentHelp("Print the changes after this id (0: from the oldest one kept).", valueName: "id"))
    var since: Int64 = 0

    @Flag(help: "After catching up, stay connected and print new changes as they commit.")
    var follow = false

    @Option(help: ArgumentHelp("Stop after printing this many changes.", valueName: "n"))
    var limit: Int?

    @Option(help: ArgumentHelp("Changes read per query.", valueName: "n"))
    var batch: Int = 500

    @Option(help: ArgumentHelp("With --follow, also read this often without a notification.", valueName: "duration"))
    var pollInterval: Duration = .seconds(5)

    /// Hidden: tests shorten it to see a closed standard output ended without waiting.
    @Option(
        help: ArgumentHelp(
            "How often to look whether standard output's reader is gone while nothing is printed (default 5s).", valueName: "duration",
            visibility: .hidden))
    var outputCheckInterval: Duration = .seconds(5)

    @Option(
        help: ArgumentHelp(
            "Only changes of purchases of this app user (appAccountToken), before or after the change.",
            valueName: "uuid"))
    var appAccountToken: String?

    @Option(
        help: ArgumentHelp(
            "Only changes of purchases of this app user (the app's own ID for them, from `reconciler import`), before or after the change.",
            valueName: "id"))
    var appUserId: String?

    @Option(help: ArgumentHelp("Only changes made by this run (its id, as `status` and the run's report show).", valueName: "id"))
    var runId: Int64?

    @Option(help: ArgumentHelp("Only rows of this kind: purchase or notification (default: both).", valueName: "kind"))
    var kind: PurchaseStore.FeedKind?

    @Flag(help: "Print the id of the newest change (0 when the feed is empty) and exit.")
    var newest = false

    @Option(
        help: ArgumentHelp(
            "Delete the changes recorded longer ago than this (at least 1h, e.g. 30d), print how many, and exit.",
            valueName: "duration"))
    var pruneBefore: Duration?

    @OptionGroup var options: StoredDataOptions

    /// The shortest retention `--prune-before` accepts: `reconciler prune`'s.
    static let minimumRetention = PrunePart.minimumAge

    func validate() throws {
        guard since >= 0 else { throw ValidationError("--since must be a change id, 0 or more") }
        guard batch >= 1, batch <= 10_000 else { throw ValidationError("--batch must be between 1 and 10000") }
        if let limit, limit < 1 { throw ValidationError("--limit must be at least 1") }
        guard pollInterval >= .milliseconds(100) else {
            throw ValidationError("--poll-interval: \(pollInterval.operatorText) is shorter than 100ms")
        }
        guard outputCheckInterval >= .milliseconds(10) else {
            throw ValidationError("--output-check-interval: \(outputCheckInterval.operatorText) is shorter than 10ms")
        }
        if let appAccountToken, UUID(uuidString: appAccountToken) == nil {
            throw ValidationError("--app-account-token: \(appAccountToken) is not a UUID (the app's appAccountToken)")
        }
        if let runId, runId < 1 { throw ValidationError("--run-id must be a run's id (1 or more)") }
        if let problem = appUserId.flatMap(ImportFileReader.appUserIdProblem) { throw ValidationError(problem) }
        let reading = follow || since != 0 || limit != nil || appAccountToken != nil || runId != nil || kind != nil || appUserId != nil
        if let pruneBefore {
            guard !reading, !newest else {
                throw ValidationError(
                    "--prune-before is a mode of its own: give it without --follow, --since, --limit, --app-account-token, --app-user-id, --run-id, --kind or --newest"
                )
            }
            guard pruneBefore >= Self.minimumRetention else {
                throw ValidationError("--prune-before: \(pruneBefore.operatorText) is shorter than 1h (30d, say)")
            }
        }
        if newest, reading {
            throw ValidationError(
                "--newest is a mode of its own: give it without --follow, --since, --limit, --app-account-token, --app-user-id, --run-id or --kind")
        }
    }

    func run() async throws {
        let logger = logging.makeLogger()
        if let pruneBefore {
            try await prune(olderThan: pruneBefore, logger: logger)
        } else if newest {
            let position = try await database.withCurrentSchema(logger: logger) { database in
                let store = PurchaseStore(logger: logger)
                return try await database.transaction { try await store.newestPosition(on: $0) }
            }
            print(position.changeId)
        } else {
            let configuration = ChangeFeedFollower.Configuration(
                since: since, follow: follow, limit: limit, batch: batch, pollInterval: pollInterval,
                apps: try app.storedScope().appsOnly(), appAccountToken: appAccountToken?.lowercased(), runId: runId,
                kind: kind, appUserId: appUserId)
            let outputCheckInterval = self.outputCheckInterval
            StandardOutput.ignoreBrokenPipeSignal()
            do {
                try await database.runWork(logger: logger) { database in
                    let follower = ChangeFeedFollower(configuration: configuration, database: database, logger: logger)
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        group.addTask {
                            try await follower.run { change in try StandardOutput.write(try change.jsonLine() + "\n") }
                        }
                        // A reader that goes away while nothing is written is seen only by looking.
                        group.addTask {
                            try await StandardOutput.waitUntilReaderIsGone(checkingEvery: outputCheckInterval)
                            throw StandardOutput.ReaderGone()
                        }
                        _ = try await group.next()
                        group.cancelAll()
                    }
                }
            } catch is StandardOutput.ReaderGone {
                // Nobody reads any more (`changes | head -1`, a consumer that died): the consumer resumes
                // after the last line it processed, so there is nothing to report.
            } catch let error as ReconcilerError where error.code == .interrupted {
                // SIGTERM or SIGINT: every line printed is whole, and the consumer resumes after the last one.
            }
        }
    }

    /// `--prune-before`: the `changes` part of `reconciler prune` (``PruneCommand``), with its rule,
    /// words and exit code.
    private func prune(olderThan retention: Duration, logger: Logger) async throws {
        let cutoff = (Timestamp.now - retention).date
        let pruned = try await database.withCurrentSchema(logger: logger) { database in
            return try await Pruner(database: database).prune(.changes, before: cutoff)
        }
        print("pruned \(pruned) \(PrunePart.changes.describe(cutoff: cutoff))")
    }
}
