import AppStoreServer

/// Notifications whose payload has no `data`: RENEWAL_EXTENSION/SUMMARY (`summary`),
/// EXTERNAL_PURCHASE_TOKEN with CREATED, ACTIVE_TOKEN_REMINDER and UNREPORTED
/// (`externalPurchaseToken`), and RESCIND_CONSENT (`appData`). They carry no purchase, so they
/// change nothing in the ground truth; a reconciler must verify them against the app and
/// environment they name, and record them.
extension ScenarioGenerator {
    /// The kinds, in the order they are emitted.
    static let kindsWithoutData: [(NotificationTypeV2, Subtype?)] = [
        (.renewalExtension, .summary), (.externalPurchaseToken, .created), (.externalPurchaseToken, .activeTokenReminder),
        (.externalPurchaseToken, .unreported), (.rescindConsent, nil),
    ]

    /// Emits each kind once outside the outage (delivered live) and, when the scenario has an
    /// outage that is over, once inside it (so a run must replay it).
    mutating func simulateNotificationsWithoutData() {
        let kinds = Self.kindsWithoutData
        for (index, (type, subtype)) in kinds.enumerated() {
            if let at = liveTime(fraction: 0.04 + 0.05 * Double(index)) {
                emitWithoutData(type, subtype, at: at)
            }
        }
        guard let start = configuration.outageStart, let end = configuration.outageEnd, end > start, end <= now else { return }
        for (index, (type, subtype)) in kinds.enumerated() {
            emitWithoutData(type, subtype, at: start + Int64(Double(end - start) * (0.08 + 0.17 * Double(index))))
        }
    }

    /// A time at `fraction` of the span, moved out of the outage (with a margin for the delay of
    /// the first send attempt), or `nil` when the span has no such time.
    func liveTime(fraction: Double) -> Int64? {
        let margin: Int64 = 60_000
        var time = configuration.start + Int64(Double(configuration.span) * fraction)
        if let outageStart = configuration.outageStart, let outageEnd = configuration.outageEnd,
            time + margin > outageStart, time < outageEnd + margin
        {
            time = outageStart - margin >= configuration.start ? outageStart - margin : outageEnd + margin
        }
        return time < now - margin ? time : nil
    }

    mutating func emitWithoutData(_ type: NotificationTypeV2, _ subtype: Subtype?, at time: Int64) {
        let production = environment == .production
        var plan = ScenarioWorld.PlannedNotification(
            notificationUUID: rng.uuid(), notificationType: type, subtype: subtype, signedDate: time)
        switch (type, subtype) {
        case (.renewalExtension, _):
            // Extend Subscription Renewal Dates for All Active Subscribers, asked for storefronts
            // where this app has no subscriber: nothing extended, so no purchase changes.
            plan.summary = Summary(
                environment: environment, appAppleId: configuration.appAppleId, bundleId: configuration.bundleId,
                productId: MockProduct.premiumMonthly.productId, requestIdentifier: rng.uuid(),
                storefrontCountryCodes: ["CAN", "MEX"], succeededCount: 0, failedCount: 0)
        case (.externalPurchaseToken, _):
            // Sandbox tokens are told apart by their SANDBOX prefix (the token has no environment).
            let id = (production ? "" : "SANDBOX_") + rng.uuid()
            var token = ExternalPurchaseToken(
                externalPurchaseId: id, tokenCreationDate: time - 1000, appAppleId: configuration.appAppleId,
                bundleId: configuration.bundleId)
            switch subtype {
            case .unreported?:
                // Apple reminds about a token the developer did not report in time.
                token.tokenCreationDate = time - 10 * period
            case .activeTokenReminder?:
                // A custom link token that is still active.
                token.tokenCreationDate = time - 5 * period
                token.tokenType = "SERVICES"
                token.tokenExpirationDate = time + 25 * period
            default:
                token.tokenType = "ACQUISITION"
                token.tokenExpirationDate = time + 30 * period
            }
            plan.externalPurchaseToken = token
        default:
            let accountId = world.accounts.first { !$0.transactionIds.isEmpty }?.id ?? "account-rescinding"
            plan.appTransaction = AppTransaction(
                receiptType: environment, appAppleId: production ? configuration.appAppleId : nil, bundleId: configuration.bundleId,
                applicationVersion: "1.0", receiptCreationDate: time, originalPurchaseDate: configuration.start,
                originalApplicationVersion: "1.0", appTransactionId: appTransactionId(of: accountId), originalPlatform: "iOS")
        }
        world.notifications.append(plan)
    }

    /// Gives every transaction an order ID (10 uppercase letters and digits, like `MQ5Q7X2ZYB`),
    /// derived from the seed and the transaction ID, so the same scenario has the same orders.
    static func assignOrderIds(_ world: inout ScenarioWorld, seed: UInt64) {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        for account in world.accounts {
            for transactionId in account.transactionIds {
                let hash = transactionId.utf8.reduce(UInt64(14_695_981_039_346_656_037)) { ($0 ^ UInt64($1)) &* 1_099_511_628_211 }
                var generator = SeededGenerator(seed: seed ^ hash)
                var orderId: String
                repeat {
                    orderId = String((0..<10).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &generator)] })
                } while world.orders[orderId] != nil
                world.orders[orderId] = [transactionId]
            }
        }
    }
}
