import AppStoreServer
import Logging

/// What both phases of a run work with: the run, the handler that writes its results (in a dry
/// run, the one writing the shadow tables), the App Store client, the ledger, the progress shown
/// to the operator, and the tally that tells a forged payload from a wrong configuration.
struct RunContext: Sendable {
    let run: RunRecord
    let handler: NotificationHandler
    let client: AppStoreServerAPIClient
    let ledger: RunLedger
    let progress: RunProgress
    let tally: VerificationTally
    let logger: Logger

    var store: PurchaseStore { handler.store }
    var database: Database { handler.database }
}
