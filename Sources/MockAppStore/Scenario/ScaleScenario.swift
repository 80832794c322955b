import AppStoreServer

/// The scale scenario (`mock-appstore --scale-notifications N`): many customers whose whole lives
/// fall inside the outage window, mostly monthly subscriptions that renew, with every urgent kind
/// (billing recovery, each expiry subtype, refund, revoke, grace period, failed renewal) and some
/// one-time purchases among them.
///
/// Each customer is simulated on its own, from a seed derived from the scenario's seed and its
/// index, with the same events as the default scenarios (``ScenarioGenerator``): a customer's
/// world is cheap to rebuild, so nothing but a compact index needs to stay in memory. Its
/// transaction IDs start at `transactionBase + index × customerStride` and its order IDs begin
/// with its index in base 36, so an ID names its customer without a lookup table.
///
/// ```swift
/// let scale = try ScaleScenario(configuration: .init(seed: 7, now: now, outageStart: now - 86_400_000, outageEnd: now - 3_600_000))
/// let world = scale.world(ofCustomer: 12)
/// ```
struct ScaleScenario: Sendable {
    struct ConfigurationError: Error, CustomStringConvertible {
        var description: String
    }

    static let transactionBase: Int64 = 3_000_000_000_000_000
    static let webOrderLineItemBase: Int64 = 500_000_000_000_000
    /// Room for each customer's transaction IDs (a customer uses a few hundred at most).
    static let customerStride: Int64 = 100_000
    static let orderAlphabet = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ")

    /// The mock's scenario (environment, bundle, seed, the present, the outage).
    let configuration: ScenarioConfiguration
    /// What each customer is simulated with: history from just after the outage starts to just
    /// before it ends, so every first send attempt (at most 2 s after signing) falls inside it.
    let customerConfiguration: ScenarioConfiguration

    init(configuration: ScenarioConfiguration) throws {
        guard let start = configuration.outageStart, let end = configuration.outageEnd else {
            throw ConfigurationError(description: "the scale scenario needs an outage window (its notifications all fall inside it)")
        }
        guard end <= configuration.now else {
            throw ConfigurationError(description: "the scale scenario's outage must be over (end at or before now)")
        }
        guard end - start >= 60_000 else {
            throw ConfigurationError(description: "the scale scenario's outage must last at least a minute")
        }
        self.configuration = configuration
        var customers = configuration
        customers.now = end - 3_000
        customers.span = customers.now - (start + 1_000)
        customers.outageStart = nil
        customers.outageEnd = nil
        customers.additionalOutages = []
        customers.scriptedOutageCustomers = false
        customers.notificationsWithoutData = false
        customers.forgedNotifications = 0
        self.customerConfiguration = customers
    }

    /// Everything customer `index` did, its notifications ordered by (signedDate, notificationUUID).
    func world(ofCustomer index: Int) -> ScenarioWorld {
        var generator = ScenarioGenerator(configuration: customerConfiguration)
        let mixed = (configuration.seed &* 0x9E37_79B9_7F4A_7C15) ^ (UInt64(index) &* 0xBF58_476D_1CE4_E5B9) ^ 0x5CA1_E5CA_1E5C_A1E5
        generator.rng = SeededGenerator(seed: mixed)
        generator.nextTransactionNumber = Self.transactionBase + Int64(index) * Self.customerStride
        generator.nextWebOrderLineItem = Self.webOrderLineItemBase + Int64(index) * Self.customerStride
        generator.simulateScaleCustomer(index: index)
        var world = generator.world
        for account in world.accounts {
            for (position, transactionId) in account.transactionIds.enumerated() {
                world.orders[Self.orderId(customer: index, position: position)] = [transactionId]
            }
        }
        world.notifications.sort { ($0.signedDate, $0.notificationUUID) < ($1.signedDate, $1.notificationUUID) }
        return world
    }

    /// The customer a transaction ID belongs to by construction (whether it exists is for its world to say).
    static func customer(ofTransaction transactionId: String) -> Int? {
        guard let value = Int64(transactionId), value >= transactionBase else { return nil }
        return Int((value - transactionBase) / customerStride)
    }

    /// Ten characters as Apple's are: the customer's index, then the transaction's position in its account, in base 36.
    static func orderId(customer: Int, position: Int) -> String {
        base36(customer, width: 6) + base36(position, width: 4)
    }

    static func customer(ofOrder orderId: String) -> Int? {
        let characters = Array(orderId)
        guard characters.count == 10 else { return nil }
        var value = 0
        for character in characters.prefix(6) {
            guard let digit = orderAlphabet.firstIndex(of: character) else { return nil }
            value = value * 36 + digit
        }
        return value
    }

    private static func base36(_ value: Int, width: Int) -> String {
        var digits: [Character] = []
        var rest = value
        for _ in 0..<width {
            digits.append(orderAlphabet[rest % 36])
            rest /= 36
        }
        return String(digits.reversed())
    }
}

extension ScenarioGenerator {
    /// One customer of the scale scenario, starting early in the history so its life spans most of it.
    mutating func simulateScaleCustomer(index: Int) {
        let accountId = "account-\(index)"
        world.accounts.append(.init(id: accountId))
        let start = configuration.start
        let roll = Double.random(in: 0..<1, using: &rng)
        let begin = start + rng.within(configuration.span, to: 0.1)
        switch roll {
        case ..<0.84:
            let product = rng.chance(0.5) ? MockProduct.premiumMonthly : .basicMonthly
            simulateSubscription(accountId: accountId, product: product, ownership: .purchased, start: begin, rates: .mostlyRenewals)
        case ..<0.92:
            simulateSubscription(
                accountId: accountId, product: .premiumMonthly, ownership: .familyShared, start: begin,
                rates: .mostlyRenewals)
        case ..<0.97:
            simulateSubscription(accountId: accountId, product: .basicMonthly, ownership: .purchased, start: begin, rates: .mostlyRenewals)
            simulateConsumables(accountId: accountId)
        default:
            simulateNonConsumable(accountId: accountId, at: start + rng.within(configuration.span, to: 0.9))
        }
    }
}
