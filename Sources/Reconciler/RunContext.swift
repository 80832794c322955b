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
    /// Whether the run's deliveries to the app's webhook wait for its query of consumption requests.
    let deliveryHold = DeliveryHold()

    var store: PurchaseStore { handler.store }

    /// A run that forwards holds its deliveries back, all but the consumption requests still before
    /// their deadline, while it queries consumption requests (the first query of its plan by
    /// default), so the app's webhook hears of those first; the live webhook never holds. A held
    /// delivery is released when that query is done, or by itself after ``longest`` (a run that dies
    /// holding keeps nothing back for long).
    final class DeliveryHold: Sendable {
        /// The longest a delivery is held back.
        static let longest: Duration = .seconds(600)

        private let holding = Locked(false)

        var isHolding: Bool { holding.withLock { $0 } }

        func start() { holding.withLock { $0 = true } }

        /// Ends the hold; returns whether it was on.
        @discardableResult
        func end() -> Bool {
            holding.withLock { state in
                defer { state = false }
                return state
            }
        }
    }
    var database: Database { handler.database }
}
