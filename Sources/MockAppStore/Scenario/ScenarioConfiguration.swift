package import AppStoreServer
import Foundation

/// What the mock App Store simulates: customers of one app, their purchases over a span of time
/// ending now, and an outage of the app's webhook during which deliveries fail.
///
/// The same configuration always gives the same customers, purchases and notifications.
package struct ScenarioConfiguration: Sendable {
    package var seed: UInt64
    package var customers: Int
    /// The scenario's present, UNIX ms; everything it simulates happened before.
    package var now: Int64
    /// How far back the simulated history reaches, ms.
    package var span: Int64
    /// When the app's webhook was down, UNIX ms (`nil`: no outage).
    package var outageStart: Int64?
    package var outageEnd: Int64?
    /// More windows during which deliveries fail (scripted customers and forged payloads belong to the first).
    package var additionalOutages: [ClosedRange<Int64>] = []
    package var environment: AppStoreEnvironment
    package var bundleId: String
    package var appAppleId: Int64
    /// The length of a "monthly" period, ms (accelerated, as the sandbox does, so a short
    /// scenario has many renewals); a yearly one is twelve of them.
    package var renewalPeriod: Int64
    /// Add scripted customers whose notable events (billing recovery, expiries, refund, revoke,
    /// an unknown notification type...) fall inside the outage.
    package var scriptedOutageCustomers: Bool
    /// The chance that a subscriber also gets a notification of a type Apple has not documented.
    package var unknownTypeRate: Double
    /// Notifications signed by a stranger's CA slipped into the history (inside the outage), which a
    /// reconciler must reject. They are not part of the ground truth.
    package var forgedNotifications: Int
    /// Add the notifications whose payload has no `data` (RENEWAL_EXTENSION/SUMMARY,
    /// EXTERNAL_PURCHASE_TOKEN, RESCIND_CONSENT), live and inside the outage. They carry no purchase.
    package var notificationsWithoutData: Bool
    /// Scale mode: instead of `customers`, simulate customers whose whole lives fall inside the
    /// outage window until it holds at least this many notifications (``ScaleScenario``), each
    /// customer rebuilt from the seed when a request needs it. No live delivery, no scripted
    /// customers, no forged payloads, no payloads without `data`.
    package var scaleNotifications: Int?
    /// Which date Get Notification History selects a window on and orders its pages by (Apple
    /// documents neither), and with it how long after signing the first send attempt comes.
    package var historyDate: HistoryDate = .firstSendAttempt
    /// Which block of transaction IDs (and web order line item IDs) the scenario draws from: block 0
    /// starts at 2000000100000000, block n ten billion IDs later. The mock gives each app and
    /// environment its own block, as Apple's IDs are unique across apps (`--shared-transaction-ids`
    /// gives them all block 0).
    package var transactionIdBlock: Int = 0
    /// Customers whose last activity is older than Get Notification History's retention (180 days,
    /// 30 in the sandbox), in real time: annual subscriptions still running, lifetime unlocks,
    /// expired subscriptions (``ScenarioGenerator/simulateDormantCustomers()``). No notification
    /// of theirs is left to deliver or to replay: only an import of the IDs the app holds
    /// (`GET /mock/identifiers`) finds them.
    package var dormantCustomers: Int = 0

    /// How long Get Notification History keeps notifications in this scenario's environment.
    package var historyRetention: Int64 { (environment == .production ? 180 : 30) * 86_400_000 }

    /// The date Get Notification History's `startDate`/`endDate` select on and its pages follow.
    /// Apple documents neither, so a reconciler must be right with both.
    package enum HistoryDate: String, Sendable, CaseIterable, Codable {
        /// The first send attempt, 0.1 to 2 s after signing, derived from the UUID (the default).
        case firstSendAttempt = "first-send-attempt"
        /// The payload's `signedDate`; the first send attempt 0 to 2 s after it, derived from the
        /// UUID and the seed, so pages are not in first-attempt order.
        case signedDate = "signed-date"
    }

    package init(
        seed: UInt64 = 1, customers: Int = 100, now: Int64 = Int64(Date().timeIntervalSince1970 * 1000),
        span: Int64 = 3 * 86_400_000, outageStart: Int64? = nil, outageEnd: Int64? = nil,
        environment: AppStoreEnvironment = .production, bundleId: String = "com.example.reconciler.mock",
        appAppleId: Int64 = 1_234_567_890, renewalPeriod: Int64 = 8 * 3_600_000, scriptedOutageCustomers: Bool = true,
        unknownTypeRate: Double = 0.05, forgedNotifications: Int = 0, notificationsWithoutData: Bool = true
    ) {
        self.seed = seed
        self.customers = customers
        self.now = now
        self.span = span
        self.outageStart = outageStart
        self.outageEnd = outageEnd
        self.environment = environment
        self.bundleId = bundleId
        self.appAppleId = appAppleId
        self.renewalPeriod = renewalPeriod
        self.scriptedOutageCustomers = scriptedOutageCustomers
        self.unknownTypeRate = unknownTypeRate
        self.forgedNotifications = forgedNotifications
        self.notificationsWithoutData = notificationsWithoutData
    }

    /// The start of the simulated history.
    package var start: Int64 { now - span }

    /// The oldest moment anything is signed for: the start, or with dormant customers their
    /// purchases, up to 62 days older than the longest retention (production's).
    package var earliestActivity: Int64 { dormantCustomers > 0 ? min(start, now - 250 * 86_400_000) : start }

    func isInOutage(_ time: Int64) -> Bool {
        if additionalOutages.contains(where: { time >= $0.lowerBound && time < $0.upperBound }) { return true }
        guard let outageStart, let outageEnd else { return false }
        return time >= outageStart && time < outageEnd
    }
}
