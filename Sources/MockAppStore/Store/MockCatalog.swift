import AppStoreServer
import Foundation
import Synchronization

/// A scenario in the form the endpoints serve: signed notifications ordered by the date history
/// windows select on (``ScenarioConfiguration/HistoryDate``), and each account's transactions
/// ordered by modification date.
final class MockCatalog: Sendable {
    struct Notification: Sendable {
        var plan: ScenarioWorld.PlannedNotification
        /// The JWS Apple sent; the same bytes every time it is returned.
        var signedPayload: String
        /// When the App Store first tried to send it.
        var firstAttemptDate: Int64
        /// What history windows select on and pages are ordered by: the first send attempt or `signedDate`.
        var historyDate: Int64
        /// Signed by a stranger's CA (`--forged`): a reconciler must quarantine it.
        var forged = false

        init(plan: ScenarioWorld.PlannedNotification, signedPayload: String, configuration: ScenarioConfiguration, forged: Bool = false) {
            self.plan = plan
            self.signedPayload = signedPayload
            self.firstAttemptDate = MockCatalog.firstAttemptDate(plan, configuration)
            self.historyDate = MockCatalog.historyDate(plan, configuration)
            self.forged = forged
        }

        /// Where it sorts in Get Notification History: (history date, notificationUUID).
        var historyKey: (Int64, String) { (historyDate, plan.notificationUUID) }
    }

    struct TransactionEntry: Sendable {
        var payload: JWSTransactionDecodedPayload
        var modifiedAt: Int64
    }

    /// What the endpoints read; replaced as a whole when an event is added at run time.
    struct Snapshot: Sendable {
        var world: ScenarioWorld
        /// Ordered by (firstAttemptDate, notificationUUID).
        var notifications: [Notification]
        /// Each account's transactions, newest version of each, ordered by (modifiedAt, transactionId).
        var transactionsByAccount: [String: [TransactionEntry]]
        /// `--forged`: order IDs whose Look Up Order ID answer carries a transaction signed by a stranger's CA.
        var forgedOrders: [String: ForgedOrder] = [:]
    }

    /// An order ID answered with a forged signed transaction (`FORGED0000`, ...).
    struct ForgedOrder: Sendable {
        var transaction: JWSTransactionDecodedPayload
        var signedTransaction: String
    }

    let configuration: ScenarioConfiguration
    let signer: JWSSigner
    private let state: Mutex<Snapshot>

    init(world: ScenarioWorld, configuration: ScenarioConfiguration, signer: JWSSigner) async throws {
        self.configuration = configuration
        self.signer = signer
        var notifications = try await Self.sign(world.notifications, configuration: configuration, signer: signer)
        var forgedOrders: [String: ForgedOrder] = [:]
        if configuration.forgedNotifications > 0 {
            let forgeries = try Self.forgeries(configuration)
            notifications = (notifications + forgeries.notifications).sorted { $0.historyKey < $1.historyKey }
            forgedOrders = forgeries.orders
        }
        self.state = Mutex(
            Snapshot(
                world: world, notifications: notifications,
                transactionsByAccount: Self.transactionsByAccount(world), forgedOrders: forgedOrders))
    }

    var snapshot: Snapshot { state.withLock { $0 } }

    /// Each account's transactions, the newest version of each as of `asOf` (UNIX ms; by default every version).
    static func transactionsByAccount(_ world: ScenarioWorld, asOf: Int64 = .max) -> [String: [TransactionEntry]] {
        var result: [String: [TransactionEntry]] = [:]
        for (transactionId, versions) in world.transactionVersions {
            guard let newest = versions.last(where: { $0.modifiedAt <= asOf }), let account = world.accountOfTransaction[transactionId] else {
                continue
            }
            result[account, default: []].append(.init(payload: newest.payload, modifiedAt: newest.modifiedAt))
        }
        return result.mapValues { entries in
            entries.sorted { ($0.modifiedAt, $0.payload.transactionId ?? "") < ($1.modifiedAt, $1.payload.transactionId ?? "") }
        }
    }

    /// Refunds a transaction now, as if the customer got a refund while the mock runs: the
    /// transaction gets a new version (so transaction history returns it again) and a REFUND
    /// notification is added. Returns the new notification, or `nil` for an unknown transaction.
    func refund(transactionId: String, at time: Int64) throws -> Notification? {
        try state.withLock { snapshot in
            guard var versions = snapshot.world.transactionVersions[transactionId], var transaction = versions.last?.payload,
                let account = snapshot.world.accountOfTransaction[transactionId]
            else { return nil }
            transaction.revocationDate = time - 1
            transaction.revocationReason = .refundedDueToIssue
            transaction.revocationType = .refundFull
            transaction.revocationPercentage = 100_000
            versions.append(.init(payload: transaction, modifiedAt: time))
            snapshot.world.transactionVersions[transactionId] = versions
            let original = transaction.originalTransactionId ?? transactionId
            let isSubscription = transaction.type == .autoRenewableSubscription
            var generator = SeededGenerator(seed: UInt64(bitPattern: time) ^ 0x5EED)
            let plan = ScenarioWorld.PlannedNotification(
                notificationUUID: generator.uuid(), notificationType: .refund, subtype: nil, signedDate: time, accountId: account,
                originalTransactionId: original, transaction: transaction,
                renewalInfo: isSubscription ? snapshot.world.renewalVersions[original]?.last : nil,
                status: isSubscription ? .revoked : nil)
            if isSubscription { snapshot.world.recordSubscription(original, status: .revoked, renewal: plan.renewalInfo, at: time) }
            snapshot.world.notifications.append(plan)
            let notification = Notification(
                plan: plan, signedPayload: try Self.signNotification(plan, configuration: configuration, signer: signer),
                configuration: configuration)
            snapshot.notifications.append(notification)
            snapshot.transactionsByAccount = Self.transactionsByAccount(snapshot.world)
            return notification
        }
    }

    /// Sets the app account token of a purchase now, as Set App Account Token does: its latest
    /// transaction (and any later one) gets a new version carrying it, and so does its renewal
    /// info; past transactions keep theirs. `false` for a purchase the catalog does not have.
    func setAppAccountToken(_ token: String, originalTransactionId: String, at time: Int64) -> Bool {
        state.withLock { snapshot in
            let purchase = snapshot.world.transactionVersions.compactMap { id, versions -> (String, JWSTransactionDecodedPayload)? in
                guard let payload = versions.last?.payload, (payload.originalTransactionId ?? id) == originalTransactionId else { return nil }
                return (id, payload)
            }
            guard !purchase.isEmpty else { return false }
            let latest = GroundTruth.latestTransaction(purchase.map(\.1))
            for (id, payload) in purchase where (payload.purchaseDate ?? 0) >= (latest.purchaseDate ?? 0) {
                var changed = payload
                changed.appAccountToken = token
                snapshot.world.transactionVersions[id, default: []].append(.init(payload: changed, modifiedAt: time))
            }
            if var renewal = snapshot.world.renewalVersions[originalTransactionId]?.last {
                renewal.appAccountToken = token
                let status = snapshot.world.subscriptionStatus[originalTransactionId] ?? .active
                snapshot.world.recordSubscription(originalTransactionId, status: status, renewal: renewal, at: time)
            }
            snapshot.transactionsByAccount = Self.transactionsByAccount(snapshot.world)
            return true
        }
    }

    /// Signs every notification, with its nested values signed at the same instant, on all cores.
    static func sign(
        _ plans: [ScenarioWorld.PlannedNotification], configuration: ScenarioConfiguration,
        signer: JWSSigner
    ) async throws -> [Notification] {
        let chunks = stride(from: 0, to: plans.count, by: 256).map { Array(plans[$0..<min($0 + 256, plans.count)]) }
        let signed = try await withThrowingTaskGroup(of: (Int, [Notification]).self) { group in
            for (index, chunk) in chunks.enumerated() {
                group.addTask {
                    (
                        index,
                        try chunk.map { plan in
                            Notification(
                                plan: plan, signedPayload: try signNotification(plan, configuration: configuration, signer: signer),
                                configuration: configuration)
                        }
                    )
                }
            }
            var results = [[Notification]](repeating: [], count: chunks.count)
            for try await (index, notifications) in group { results[index] = notifications }
            return results.flatMap { $0 }
        }
        return signed.sorted { $0.historyKey < $1.historyKey }
    }

    /// Notifications that look like the app's but are signed by another CA, inside the outage, and
    /// an order ID for each forged transaction that Look Up Order ID answers with it.
    static func forgeries(_ configuration: ScenarioConfiguration) throws -> (notifications: [Notification], orders: [String: ForgedOrder]) {
        let stranger = try SigningCertificateAuthority(options: .init(name: "Forger", seed: "forger-\(configuration.seed)"))
        var generator = SeededGenerator(seed: configuration.seed ^ 0xF0F0)
        let start = configuration.outageStart ?? configuration.now - configuration.span / 2
        let end = configuration.outageEnd ?? configuration.now
        var orders: [String: ForgedOrder] = [:]
        let notifications = try (0..<configuration.forgedNotifications).map { index in
            let at = start + (end - start) * Int64(index + 1) / Int64(configuration.forgedNotifications + 1)
            let transactionId = String(9_000_000_000_000_000 + Int64(index))
            let plan = ScenarioWorld.PlannedNotification(
                notificationUUID: generator.uuid(), notificationType: .didRenew, subtype: nil, signedDate: at, accountId: nil,
                originalTransactionId: transactionId,
                transaction: JWSTransactionDecodedPayload(
                    originalTransactionId: transactionId, transactionId: transactionId, bundleId: configuration.bundleId,
                    productId: MockProduct.premiumMonthly.productId, purchaseDate: at, expiresDate: at + 365 * 86_400_000,
                    type: .autoRenewableSubscription, inAppOwnershipType: .purchased, environment: configuration.environment),
                status: .active)
            if var transaction = plan.transaction {
                transaction.signedDate = at
                orders["FORGED" + String(format: "%04d", index)] = ForgedOrder(
                    transaction: transaction, signedTransaction: try stranger.signer.sign(transaction))
            }
            return Notification(
                plan: plan, signedPayload: try signNotification(plan, configuration: configuration, signer: stranger.signer),
                configuration: configuration, forged: true)
        }
        return (notifications, orders)
    }

    /// Apple sends a notification shortly after signing it: 0.1 to 2 s, derived from the UUID.
    static func firstAttemptDelay(_ uuid: String) -> Int64 {
        100 + Int64(fnv1a(uuid) % 1900)
    }

    /// With history on `signedDate`: 0 to 2 s, derived from the UUID's bits and the seed (the
    /// scale index keeps only the bits).
    static func seededFirstAttemptDelay(high: UInt64, low: UInt64, seed: UInt64) -> Int64 {
        var generator = SeededGenerator(seed: seed ^ high ^ (low &* 0x9E37_79B9_7F4A_7C15))
        return Int64.random(in: 0...2_000, using: &generator)
    }

    /// When the App Store first tried to send `plan`, in the scenario's mode.
    static func firstAttemptDate(_ plan: ScenarioWorld.PlannedNotification, _ configuration: ScenarioConfiguration) -> Int64 {
        switch configuration.historyDate {
        case .firstSendAttempt:
            return plan.signedDate + firstAttemptDelay(plan.notificationUUID)
        case .signedDate:
            let (high, low) = ScaleCatalog.uuidBits(plan.notificationUUID) ?? (fnv1a(plan.notificationUUID), 0)
            return plan.signedDate + seededFirstAttemptDelay(high: high, low: low, seed: configuration.seed)
        }
    }

    /// The date Get Notification History selects `plan` on and orders it by.
    static func historyDate(_ plan: ScenarioWorld.PlannedNotification, _ configuration: ScenarioConfiguration) -> Int64 {
        switch configuration.historyDate {
        case .firstSendAttempt: firstAttemptDate(plan, configuration)
        case .signedDate: plan.signedDate
        }
    }

    private static func fnv1a(_ text: String) -> UInt64 {
        text.utf8.reduce(UInt64(1_469_598_103_934_665_603)) { ($0 ^ UInt64($1)) &* 1_099_511_628_211 }
    }

    static func signNotification(
        _ plan: ScenarioWorld.PlannedNotification, configuration: ScenarioConfiguration,
        signer: JWSSigner
    ) throws -> String {
        try signNotification(plan, configuration: configuration) { json, _ in try signer.sign(payloadJSON: json) }
    }

    /// Builds the notification's payload with its nested values, handing each JSON to `sign` in a
    /// fixed order (its position is the second argument: nested values first, the payload last).
    static func signNotification(
        _ plan: ScenarioWorld.PlannedNotification, configuration: ScenarioConfiguration,
        sign: (Data, Int) throws -> String
    ) throws -> String {
        var position = 0
        func signer(_ value: some Encodable) throws -> String {
            defer { position += 1 }
            return try sign(try JWSSigner.encode(value), position)
        }
        // Sandbox payloads omit the app's Apple ID where Apple's do (`data`, and `appData` alike).
        let appAppleId = configuration.environment == .production ? configuration.appAppleId : nil
        var payload = ResponseBodyV2DecodedPayload(
            notificationType: plan.notificationType, subtype: plan.subtype, notificationUUID: plan.notificationUUID,
            version: "2.0", signedDate: plan.signedDate)
        if let summary = plan.summary {
            payload.summary = summary
        } else if let token = plan.externalPurchaseToken {
            payload.externalPurchaseToken = token
        } else if var appTransaction = plan.appTransaction {
            appTransaction.receiptCreationDate = plan.signedDate
            payload.appData = AppData(
                appAppleId: appAppleId, bundleId: configuration.bundleId, environment: configuration.environment,
                signedAppTransactionInfo: try signer(appTransaction))
        } else {
            var transaction = plan.transaction
            transaction?.signedDate = plan.signedDate
            var renewal = plan.renewalInfo
            renewal?.signedDate = plan.signedDate
            payload.data = NotificationData(
                appAppleId: appAppleId, bundleId: configuration.bundleId, bundleVersion: "1.0", environment: configuration.environment,
                signedTransactionInfo: try transaction.map { try signer($0) },
                signedRenewalInfo: try renewal.map { try signer($0) }, status: plan.status,
                consumptionRequestReason: plan.consumptionRequestReason)
        }
        return try signer(payload)
    }
}

extension MockCatalog.Snapshot {
    /// The account owning a transaction id (any transaction of the customer).
    func account(ofTransaction transactionId: String) -> String? {
        world.accountOfTransaction[transactionId]
    }

    /// The order IDs of the scenario, one entry per transaction, by account then purchase.
    var orderEntries: [MockOrder] {
        var orderOf: [String: String] = [:]
        for (orderId, transactionIds) in world.orders {
            for transactionId in transactionIds { orderOf[transactionId] = orderId }
        }
        var entries: [MockOrder] = []
        for account in world.accounts {
            for transactionId in account.transactionIds {
                guard let orderId = orderOf[transactionId], let payload = world.transactionVersions[transactionId]?.first?.payload else { continue }
                entries.append(
                    MockOrder(
                        orderId: orderId, transactionId: transactionId, originalTransactionId: payload.originalTransactionId ?? transactionId,
                        account: account.id, productId: payload.productId, purchaseDate: payload.purchaseDate,
                        appAccountToken: payload.appAccountToken))
            }
        }
        for orderId in forgedOrders.keys.sorted() {
            let transaction = forgedOrders[orderId]!.transaction
            entries.append(
                MockOrder(
                    orderId: orderId, transactionId: transaction.transactionId ?? "", originalTransactionId: transaction.originalTransactionId ?? "",
                    account: "(forged)", productId: transaction.productId, purchaseDate: transaction.purchaseDate, forged: true))
        }
        return entries
    }

    /// The subscriptions of an account by originalTransactionId, with their latest transaction.
    func subscriptions(ofAccount account: String) -> [(originalTransactionId: String, latest: JWSTransactionDecodedPayload)] {
        Self.subscriptions(in: transactionsByAccount[account] ?? [])
    }

    /// The account's transactions as Apple's API serves them at `now` (UNIX ms) when it lags the
    /// App Store's events by `lag` ms (``FaultConfiguration/apiLagMilliseconds``): the newest
    /// version of each as of `now - lag`.
    func transactions(ofAccount account: String, lag: Int64, now: Int64) -> [MockCatalog.TransactionEntry] {
        lag > 0 ? MockCatalog.transactionsByAccount(world, asOf: now - lag)[account] ?? [] : transactionsByAccount[account] ?? []
    }

    /// The subscriptions among `entries` by originalTransactionId, with their latest transaction.
    static func subscriptions(in entries: [MockCatalog.TransactionEntry]) -> [(originalTransactionId: String, latest: JWSTransactionDecodedPayload)] {
        var byOriginal: [String: [JWSTransactionDecodedPayload]] = [:]
        for entry in entries where entry.payload.type == .autoRenewableSubscription {
            byOriginal[entry.payload.originalTransactionId ?? "", default: []].append(entry.payload)
        }
        return byOriginal.map { ($0.key, GroundTruth.latestTransaction($0.value)) }.sorted { $0.originalTransactionId < $1.originalTransactionId }
    }
}
