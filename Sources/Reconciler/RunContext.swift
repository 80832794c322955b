import AppStoreServer
import Logging
import ReconcilerDomain
import ReconcilerStore

/// What both phases of a run work with: the run, the handler that writes its results (in a dry
/// run, the one writing the shadow tables), the App Store client, the ledger, the progress shown
/// to the operator, the tally that tells a forged payload from a wrong configuration, and the
/// signal that lets phase 2 follow phase 1 while both run.
struct RunContext: Sendable {
    let run: RunRecord
    let handler: NotificationHandler
    let client: AppStoreServerAPIClient
    let ledger: RunLedger
    let progress: RunProgress
    let tally: VerificationTally
    let logger: Logger
    /// When a customer or shard that keeps failing is given up.
    var giveUp = GiveUpPolicy()
    /// Rung when phase 1 queues customers (and when it ends), so idle phase-2 workers start at once.
    let newCustomers = Wakeup()

    var store: PurchaseStore { handler.store }
    var database: Database { handler.database }
}
