import AppStoreServer
import Foundation
import ReconcilerShared
import Synchronization

/// The scale scenario (``ScaleScenario``) in the form the endpoints serve, for windows of a
/// million notifications: a compact index of every notification (32 bytes each) ordered by
/// (history date, notificationUUID) (the first send attempt, or `signedDate`:
/// ``ScenarioConfiguration/HistoryDate``), the positions of each type/subtype pair in it, and the
/// signatures of each notification once served. A page is two binary searches and the page
/// itself; its notifications are rebuilt from their customers' worlds and signed on first use,
/// and the cached signatures make a notification the same bytes every time it is returned.
///
/// ```swift
/// let scale = try await ScaleCatalog(configuration: scenario, notifications: 1_000_000, signer: authority.signer)
/// let page = try scale.page(start: start, end: end, filter: .kind("DID_RENEW"), after: nil, onlyFailures: false, pageSize: 20)
/// ```
final class ScaleCatalog: Sendable {
    /// One notification: where it sorts, and how to rebuild it (its customer, its position in that customer's world).
    struct Entry: Sendable {
        /// What history windows select on: the first send attempt or `signedDate`.
        var date: Int64
        var uuidHigh: UInt64
        var uuidLow: UInt64
        var customer: UInt32
        var ordinal: UInt16
        var kind: UInt16

        var key: Key { Key(date: date, high: uuidHigh, low: uuidLow) }
    }

    /// (history date, notificationUUID): the UUID's 128 bits compare as its lowercase text does.
    struct Key: Comparable, Sendable {
        var date: Int64
        var high: UInt64
        var low: UInt64

        static func < (a: Key, b: Key) -> Bool { (a.date, a.high, a.low) < (b.date, b.high, b.low) }
    }

    /// Which notifications a history query selects.
    enum Filter: Sendable {
        case everything
        /// `TYPE` (only those without a subtype, as Apple does) or `TYPE/SUBTYPE`.
        case kind(String)
        /// Every notification of a customer (the `transactionId` filter).
        case customer(Int)
    }

    struct Page: Sendable {
        var items: [NotificationHistoryResponseItem]
        /// The cursor of the last item.
        var last: (Int64, String)?
        var hasMore: Bool
    }

    let scenario: ScaleScenario
    let signer: JWSSigner
    let customerCount: Int
    let entries: [Entry]
    let kindCodes: [String: Int]
    /// Per kind code, the positions in `entries` of its notifications, in order.
    let entriesByKind: [[UInt32]]
    private let signatures: SignatureCache

    /// Simulates customers (on all cores) until the window holds at least `target` notifications, and indexes them.
    init(configuration: ScenarioConfiguration, notifications target: Int, signer: JWSSigner) async throws {
        let scenario = try ScaleScenario(configuration: configuration)
        struct Planned: Sendable {
            var date: Int64
            var uuidHigh: UInt64
            var uuidLow: UInt64
            var ordinal: UInt16
            var kind: String
        }
        var entries: [Entry] = []
        entries.reserveCapacity(target + 64)
        var kindCodes: [String: Int] = [:]
        var next = 0
        let batch = 256
        let workers = max(ProcessInfo.processInfo.activeProcessorCount, 1)
        while entries.count < target {
            let first = next
            let customers = try await withThrowingTaskGroup(of: [(Int, [Planned])].self) { group in
                for worker in 0..<workers {
                    group.addTask {
                        var done: [(Int, [Planned])] = []
                        for customer in stride(from: first + worker, to: first + batch * workers, by: workers) {
                            let world = scenario.world(ofCustomer: customer)
                            done.append(
                                (
                                    customer,
                                    try world.notifications.enumerated().map { ordinal, plan in
                                        guard let (high, low) = ScaleCatalog.uuidBits(plan.notificationUUID) else {
                                            throw ScaleScenario.ConfigurationError(
                                                description: "unexpected notification UUID \(plan.notificationUUID)")
                                        }
                                        return Planned(
                                            date: MockCatalog.historyDate(plan, configuration),
                                            uuidHigh: high, uuidLow: low, ordinal: UInt16(ordinal), kind: ScaleCatalog.kind(of: plan))
                                    }
                                ))
                        }
                        return done
                    }
                }
                var all: [(Int, [Planned])] = []
                for try await done in group { all += done }
                return all.sorted { $0.0 < $1.0 }
            }
            for (customer, planned) in customers {
                guard entries.count < target else { break }
                for item in planned {
                    let code: Int
                    if let known = kindCodes[item.kind] {
                        code = known
                    } else {
                        code = kindCodes.count
                        kindCodes[item.kind] = code
                    }
                    entries.append(
                        Entry(
                            date: item.date, uuidHigh: item.uuidHigh, uuidLow: item.uuidLow,
                            customer: UInt32(customer), ordinal: item.ordinal, kind: UInt16(code)))
                }
                next = customer + 1
            }
        }
        entries.sort { $0.key < $1.key }
        var byKind = [[UInt32]](repeating: [], count: kindCodes.count)
        for (position, entry) in entries.enumerated() { byKind[Int(entry.kind)].append(UInt32(position)) }
        self.scenario = scenario
        self.signer = signer
        self.customerCount = next
        self.entries = entries
        self.kindCodes = kindCodes
        self.entriesByKind = byKind
        self.signatures = SignatureCache(entries: entries.count)
    }

    static func kind(of plan: ScenarioWorld.PlannedNotification) -> String {
        plan.subtype.map { "\(plan.notificationType.rawValue)/\($0.rawValue)" } ?? plan.notificationType.rawValue
    }

    /// The 128 bits of a UUID's text, or `nil` if it is not 32 hex digits and 4 dashes.
    static func uuidBits(_ uuid: String) -> (UInt64, UInt64)? {
        let hex = uuid.replacingOccurrences(of: "-", with: "")
        guard uuid.count == 36, hex.count == 32, let high = UInt64(hex.prefix(16), radix: 16), let low = UInt64(hex.suffix(16), radix: 16) else {
            return nil
        }
        return (high, low)
    }

    // MARK: Customers

    func world(ofCustomer customer: Int) -> ScenarioWorld {
        scenario.world(ofCustomer: customer)
    }

    /// A customer's world in the shape the transaction, status and order endpoints read.
    func snapshot(ofCustomer customer: Int) -> MockCatalog.Snapshot {
        let world = world(ofCustomer: customer)
        return MockCatalog.Snapshot(world: world, notifications: [], transactionsByAccount: MockCatalog.transactionsByAccount(world))
    }

    /// The world of the customer owning `transactionId`, or `nil` when no customer has it.
    func snapshot(ofTransaction transactionId: String) -> MockCatalog.Snapshot? {
        guard let customer = ScaleScenario.customer(ofTransaction: transactionId), customer < customerCount else { return nil }
        let snapshot = snapshot(ofCustomer: customer)
        return snapshot.account(ofTransaction: transactionId) == nil ? nil : snapshot
    }

    func snapshot(ofOrder orderId: String) -> MockCatalog.Snapshot? {
        guard let customer = ScaleScenario.customer(ofOrder: orderId), customer < customerCount else { return nil }
        return snapshot(ofCustomer: customer)
    }

    /// The customer owning `transactionId`.
    func customer(ofTransaction transactionId: String) -> Int? {
        snapshot(ofTransaction: transactionId) == nil ? nil : ScaleScenario.customer(ofTransaction: transactionId)
    }

    // MARK: Notification history

    /// One page of Get Notification History: up to `pageSize` notifications of `filter` whose
    /// history date is in [start, end), after the cursor `after` (history date, notificationUUID).
    func page(start: Int64, end: Int64, filter: Filter, after: (Int64, String)?, onlyFailures: Bool, pageSize: Int) throws -> Page {
        // The candidates, as positions in `entries`, in order.
        let positions: [UInt32]?
        switch filter {
        case .everything: positions = nil
        case .kind(let kind): positions = kindCodes[kind].map { entriesByKind[$0] } ?? []
        case .customer(let customer): positions = self.positions(ofCustomer: customer)
        }
        let count = positions?.count ?? entries.count
        func entry(_ index: Int) -> Int { positions.map { Int($0[index]) } ?? index }
        func lowerBound(_ isBefore: (Key) -> Bool) -> Int {
            var low = 0, high = count
            while low < high {
                let middle = (low + high) / 2
                if isBefore(entries[entry(middle)].key) { low = middle + 1 } else { high = middle }
            }
            return low
        }
        var position = lowerBound { $0.date < start }
        if let after {
            if let (high, low) = Self.uuidBits(after.1) {
                let cursor = Key(date: after.0, high: high, low: low)
                position = max(position, lowerBound { $0 <= cursor })
            } else {
                // A cursor before any notification of that instant.
                position = max(position, lowerBound { $0.date < after.0 })
            }
        }
        var selected: [Int] = []
        var hasMore = false
        while position < count {
            let index = entry(position)
            position += 1
            guard entries[index].date < end else { break }
            if onlyFailures, attemptSchedule(index).contains(where: { $0.attempt.sendAttemptResult == .success }) { continue }
            if selected.count == pageSize {
                hasMore = true
                break
            }
            selected.append(index)
        }
        var worlds: [Int: ScenarioWorld] = [:]
        var items: [NotificationHistoryResponseItem] = []
        var last: (Int64, String)?
        for index in selected {
            let entry = entries[index]
            let customer = Int(entry.customer)
            let world = worlds[customer] ?? self.world(ofCustomer: customer)
            worlds[customer] = world
            let plan = world.notifications[Int(entry.ordinal)]
            items.append(
                NotificationHistoryResponseItem(
                    signedPayload: try signedPayload(index, plan),
                    sendAttempts: attempts(index, uuid: plan.notificationUUID)))
            last = (entry.date, plan.notificationUUID)
        }
        return Page(items: items, last: last, hasMore: hasMore)
    }

    /// A customer's notifications as positions in `entries`, in order.
    func positions(ofCustomer customer: Int) -> [UInt32] {
        let world = world(ofCustomer: customer)
        var result: [UInt32] = []
        for plan in world.notifications {
            guard let (high, low) = Self.uuidBits(plan.notificationUUID) else { continue }
            let key = Key(date: MockCatalog.historyDate(plan, scenario.configuration), high: high, low: low)
            var lower = 0, upper = entries.count
            while lower < upper {
                let middle = (lower + upper) / 2
                if entries[middle].key < key { lower = middle + 1 } else { upper = middle }
            }
            if lower < entries.count, entries[lower].key == key { result.append(UInt32(lower)) }
        }
        return result.sorted()
    }

    /// The JWS of the notification at `index`: built from its plan, signed on first use, the same bytes afterwards.
    func signedPayload(_ index: Int, _ plan: ScenarioWorld.PlannedNotification) throws -> String {
        try MockCatalog.signNotification(plan, configuration: scenario.configuration) { json, slot in
            let input = signer.signingInput(payloadJSON: json)
            let signature = try signatures.signature(entry: index, slot: slot) { try signer.signature(signingInput: input) }
            return signer.compact(signingInput: input, signature: signature)
        }
    }

    /// Apple's send attempts for a notification nobody delivered live: the first, then (in
    /// production) retries 1, 12, 24, 48 and 72 hours after each failure, up to the present.
    /// Attempts inside the outage fail; one outside it counts as delivered, as with no webhook.
    func attempts(_ index: Int, uuid: String) -> [SendAttemptItem] {
        attemptSchedule(index).map { attempt in
            guard attempt.attempt.sendAttemptResult != .success else { return attempt.attempt }
            return SendAttemptItem(
                attemptDate: attempt.attempt.attemptDate,
                sendAttemptResult: MockAppStore.outageFailure(uuid: uuid, attempt: attempt.number))
        }
    }

    /// The attempts with their number; a failure's result is a placeholder until its UUID is known.
    private func attemptSchedule(_ index: Int) -> [(attempt: SendAttemptItem, number: Int)] {
        attemptSchedule(firstAttemptDate: firstAttemptDate(entries[index]))
    }

    /// When the App Store first tried to send the entry's notification.
    func firstAttemptDate(_ entry: Entry) -> Int64 {
        let configuration = scenario.configuration
        switch configuration.historyDate {
        case .firstSendAttempt: return entry.date
        case .signedDate:
            return entry.date + MockCatalog.seededFirstAttemptDelay(high: entry.uuidHigh, low: entry.uuidLow, seed: configuration.seed)
        }
    }

    private func attemptSchedule(firstAttemptDate: Int64) -> [(attempt: SendAttemptItem, number: Int)] {
        let configuration = scenario.configuration
        var time = firstAttemptDate
        var number = 1
        var result: [(attempt: SendAttemptItem, number: Int)] = []
        while time <= configuration.now {
            let delivered = !configuration.isInOutage(time)
            result.append((SendAttemptItem(attemptDate: time, sendAttemptResult: delivered ? .success : .timedOut), number))
            guard !delivered, configuration.environment == .production, number <= MockAppStore.retryDelays.count else { break }
            time += MockAppStore.retryDelays[number - 1]
            number += 1
        }
        return result
    }

    // MARK: Truth

    /// The ground truth of every customer, in `reconciler export`'s order (transaction IDs grow with the customer's index).
    /// - Parameter now: the moment `entitled` is judged at, UNIX ms.
    func truth(at now: Int64 = Int64(Date().timeIntervalSince1970 * 1000)) -> [PurchaseState] {
        inParallel { GroundTruth.purchases(self.world(ofCustomer: $0), at: now) }
    }

    /// Every notification for `GET /mock/notifications`, in history order; none is forged, and
    /// one counts as delivered when an attempt of its schedule fell outside the outage.
    func notificationLines(bundleId: String, environment: String) -> [MockAppStore.NotificationLine] {
        let lines = inParallel { customer in
            self.world(ofCustomer: customer).notifications.map { plan in
                let configuration = self.scenario.configuration
                let firstAttemptDate = MockCatalog.firstAttemptDate(plan, configuration)
                let (high, low) = Self.uuidBits(plan.notificationUUID) ?? (0, 0)
                let line = MockAppStore.NotificationLine(
                    notificationUUID: plan.notificationUUID, notificationType: plan.notificationType.rawValue, subtype: plan.subtype?.rawValue,
                    signedDate: plan.signedDate, firstAttemptDate: firstAttemptDate,
                    delivered: self.attemptSchedule(firstAttemptDate: firstAttemptDate).contains { $0.attempt.sendAttemptResult == .success },
                    forged: false, bundleId: bundleId, environment: environment)
                return (Key(date: MockCatalog.historyDate(plan, configuration), high: high, low: low), line)
            }
        }
        return lines.sorted { $0.0 < $1.0 }.map(\.1)
    }

    /// Every transaction's order ID, by account then purchase.
    func orders() -> [MockOrder] {
        inParallel { self.snapshot(ofCustomer: $0).orderEntries }
    }

    /// `body` of every customer, on all cores, concatenated in customer order.
    private func inParallel<Item: Sendable>(_ body: @escaping @Sendable (Int) -> [Item]) -> [Item] {
        let workers = max(ProcessInfo.processInfo.activeProcessorCount, 1)
        let chunk = (customerCount + workers - 1) / max(workers, 1)
        let results = ParallelResults<Item>(workers)
        let customerCount = customerCount
        DispatchQueue.concurrentPerform(iterations: workers) { worker in
            let range = min(worker * chunk, customerCount)..<min((worker + 1) * chunk, customerCount)
            let items = range.flatMap(body)
            results.parts.withLock { $0[worker] = items }
        }
        return results.parts.withLock { $0.flatMap { $0 } }
    }
}

/// What each worker of ``ScaleCatalog`` made, by worker.
private final class ParallelResults<Item: Sendable>: Sendable {
    let parts: Mutex<[[Item]]>

    init(_ count: Int) { parts = Mutex(Array(repeating: [], count: count)) }
}

/// The raw ES256 signatures of each notification's nested values and payload, kept once made:
/// ECDSA signatures are randomised, so keeping them is what makes a notification the same bytes
/// on every page that returns it. 192 bytes per notification, written on first use.
final class SignatureCache: @unchecked Sendable {
    static let slots = 3
    static let size = 64
    private let bytes: UnsafeMutableRawBufferPointer
    private let known: UnsafeMutableBufferPointer<Bool>
    private let lock = Mutex<Void>(())

    init(entries: Int) {
        bytes = .allocate(byteCount: max(entries, 1) * Self.slots * Self.size, alignment: 8)
        known = .allocate(capacity: max(entries, 1) * Self.slots)
        known.initialize(repeating: false)
    }

    deinit {
        bytes.deallocate()
        known.deallocate()
    }

    /// The signature kept for (entry, slot), or the one `make` returns, kept (the first one kept wins).
    func signature(entry: Int, slot: Int, make: () throws -> Data) throws -> Data {
        precondition(slot < Self.slots, "a notification signs at most \(Self.slots) values")
        let position = entry * Self.slots + slot
        let range = position * Self.size..<(position + 1) * Self.size
        if let kept = lock.withLock({ _ in known[position] ? Data(UnsafeRawBufferPointer(rebasing: bytes[range])) : nil }) { return kept }
        let fresh = try make()
        precondition(fresh.count == Self.size, "an ES256 signature is 64 bytes")
        return lock.withLock { _ in
            if known[position] { return Data(UnsafeRawBufferPointer(rebasing: bytes[range])) }
            fresh.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: bytes[range]).copyMemory(from: $0) }
            known[position] = true
            return fresh
        }
    }
}
