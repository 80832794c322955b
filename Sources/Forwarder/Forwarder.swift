package import AppStoreServer
package import AsyncHTTPClient
import Crypto
package import Foundation
import Logging
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
package import Reconciler
package import ReconcilerDomain
import ReconcilerShared
package import ReconcilerStore
import ServiceLifecycle

/// Delivers queued notifications to the app's own webhook, as Apple would have: a POST of Apple's
/// exact body `{"signedPayload": "..."}`, so the app's handler processes it as if Apple had sent
/// it. A 2xx is recorded and the delivery is never sent again; any other answer or no answer
/// (a timeout) is retried with exponential backoff up to `maximumAttempts`, then marked failed.
///
/// Several forwarders share the queue (`serve` replicas, runs, `reconciler forward`) and never
/// have one delivery in flight at once: each leases a delivery only when it is about to send it
/// (after waiting for its turn under `requestsPerSecond`), with a token of its own and for
/// `leaseDuration`; renews the lease every quarter of it while the request is in flight; and
/// cancels the request as soon as the lease is no longer certainly its own (taken over, or not
/// renewed for three quarters of its duration, before it can run out in the database). Answers
/// are recorded only while the row carries the token. A forwarder killed after sending but before
/// recording the answer leaves the delivery to be sent again when its lease runs out (at once
/// when it died on this host): at-least-once, like Apple's own delivery (apps already dedup by
/// notificationUUID).
///
/// A forwarder delivers only the rows queued for its own URL's ``ForwardingTarget``: the queue
/// keeps no URL, so rows for another webhook wait for a process configured with that URL (it
/// says so in its log).
///
/// With a secret, each delivery carries `Reconciler-Signature: t=<UNIX seconds>,v1=<hex>`, the
/// HMAC-SHA256 of `"<t>.<body>"` with the secret, so the app can tell these deliveries from
/// strangers' (and refuse old ones by `t`).
///
/// As a `Service` it delivers until a graceful shutdown (`serve --forward-to`, `forward`);
/// ``drain(runIds:upTo:)`` delivers one run's notifications before the run ends.
///
/// ```swift
/// let forwarder = Forwarder(
///     configuration: .init(url: ForwardingURL("https://app.internal/apple"), secret: ForwardingSecret("s3cret")), database: database)
/// let left = try await forwarder.drain(runIds: [run.runId], upTo: .seconds(60))
/// ```
package struct Forwarder: Service, RunForwarding, Sendable {
    package struct Configuration: Sendable {
        /// The app's webhook; only deliveries queued for its target are sent.
        package var url: ForwardingURL
        /// Deliveries in flight at once.
        package var concurrency: Int
        /// Deliveries started per second at most by this forwarder (`nil`: no limit). Per process:
        /// several forwarders of one app together send up to the sum of theirs.
        package var requestsPerSecond: Double?
        /// How long the app may take to answer.
        package var timeout: Duration
        /// How long a lease lasts without renewal; renewed every quarter of it while a delivery is
        /// in flight, so it bounds how long a dead forwarder's delivery waits, not how long the
        /// app may take.
        package var leaseDuration: Duration
        /// Tries before a delivery is marked failed.
        package var maximumAttempts: Int
        /// The first retry's delay; each further one doubles, up to `maximumBackoff`
        /// (``backoff(afterAttempt:)``).
        package var initialBackoff: Duration
        package var maximumBackoff: Duration
        /// The shared secret of the `Reconciler-Signature` header.
        package var secret: ForwardingSecret?
        /// How often an idle forwarder looks for due deliveries.
        package var pollInterval: Duration
        /// Names this process in the queue.
        package var worker: String
        /// The ids of the targets this process's other forwarders deliver (one per app's webhook):
        /// their deliveries are not reported as waiting for another webhook.
        package var companionTargets: Set<String> = []
        /// The time this process's waits are judged by: the pacing of deliveries, the renewal of
        /// leases and when a request must stop, polling, `drain`'s limit. (A retry's delay is
        /// kept in the queue and judged by the database's clock.)
        package var clock: any MonotonicClock

        package init(
            url: ForwardingURL, concurrency: Int = 4, requestsPerSecond: Double? = nil, timeout: Duration = .seconds(10),
            leaseDuration: Duration = .seconds(30), maximumAttempts: Int = 12, initialBackoff: Duration = .seconds(5),
            maximumBackoff: Duration = .seconds(3600), secret: ForwardingSecret? = nil, pollInterval: Duration = .seconds(1),
            worker: String = ProcessIdentity.current, clock: any MonotonicClock = .system
        ) {
            self.url = url
            self.concurrency = concurrency
            self.requestsPerSecond = requestsPerSecond
            self.timeout = timeout
            self.leaseDuration = leaseDuration
            self.maximumAttempts = maximumAttempts
            self.initialBackoff = initialBackoff
            self.maximumBackoff = maximumBackoff
            self.secret = secret
            self.pollInterval = pollInterval
            self.worker = worker
            self.clock = clock
        }

        /// How long a delivery waits before its next try after its `attempt`-th failed (the
        /// first is tried again after `initialBackoff`, each later one after twice the one
        /// before), at most `maximumBackoff`.
        package func backoff(afterAttempt attempt: Int) -> Duration {
            min(initialBackoff * (1 << min(max(attempt, 1) - 1, 20)), maximumBackoff)
        }
    }

    package let configuration: Configuration
    let database: Database
    /// The queue's operations, each a short transaction of its own.
    let queue: ForwardQueue
    let httpClient: HTTPClient
    let logger: Logger
    let pacer: Pacer
    /// The targets whose waiting deliveries this forwarder already named in its log.
    private let reportedTargets = Locked<Set<String>>([])
    /// One transaction at a time (leases, answers, renewals): the forwarder needs one pooled connection.
    private let oneAtATime = OneAtATime()

    package init(configuration: Configuration, database: Database, httpClient: HTTPClient = .forwarding) {
        self.configuration = configuration
        self.database = database
        self.queue = ForwardQueue(database: database)
        self.httpClient = httpClient
        self.logger = database.logger
        self.pacer = Pacer(perSecond: configuration.requestsPerSecond, clock: configuration.clock)
    }

    /// One operation on the queue (one transaction), after the one before it ended.
    private func transaction<Result: Sendable>(_ body: @escaping @Sendable () async throws -> Result) async throws -> Result {
        try await oneAtATime.run(body)
    }

    /// Delivers what is due, and what falls due, until a graceful shutdown or cancellation; a
    /// database that stays away is logged and waited for, not fatal (the queue is durable).
    package func run() async throws {
        await run(until: { Task.isShuttingDownGracefully })
    }

    /// Delivers until `isStopping` says so (checked between batches, so deliveries in flight
    /// finish and their answers are recorded) or the task is cancelled.
    package func run(until isStopping: @escaping @Sendable () -> Bool) async {
        var idleRounds = 0
        while !Task.isCancelled, !isStopping() {
            var sent = 0
            do {
                // Now and then (and at start), name the deliveries that wait for another webhook.
                if idleRounds % 60 == 0 { try await reportOtherTargets() }
                sent = try await deliverDue()
            } catch is CancellationError {
                return
            } catch {
                logger.warning("forwarding paused: the queue could not be read", metadata: ["error": "\(error)"])
            }
            guard sent == 0 else { continue }
            idleRounds += 1
            // Idle: look again after the poll interval, or sooner when asked to stop.
            let clock = configuration.clock
            let wake = clock.now + configuration.pollInterval
            while clock.now < wake, !isStopping() {
                do {
                    try await clock.sleep(for: min(.milliseconds(100), wake - clock.now))
                } catch {
                    return
                }
            }
        }
    }

    /// Where the deliveries of `runIds` stand (`nil`: the whole queue), whatever their target.
    package func summary(runIds: [Int64]?) async throws -> ForwardQueue.ForwardingSummary {
        try await transaction { [queue] in try await queue.summary(runIds: runIds) }
    }

    /// ``drain(runIds:upTo:)`` for `runIds` and every earlier run whose deliveries for this
    /// forwarder's target still wait. A run killed while it drained has recorded its end, so
    /// rerunning its command makes a new run that queues nothing the killed one stored: waiting
    /// for the earlier runs' deliveries too is what makes "the next run delivers the rest" true.
    ///
    /// The runs' own deliveries still held back are released first: a run drains only once its
    /// replay is over, and so is its hold; a delivery still held then (seen after a run killed
    /// under load was resumed) would not be due for ten minutes, past the drain. Earlier runs'
    /// holds are theirs to end.
    package func drain(runIdsAndEarlier runIds: [Int64], upTo time: Duration) async throws -> ForwardingDrain {
        for runId in runIds {
            _ = try await transaction { [queue] in try await queue.releaseHeld(runId: runId) }
        }
        let earlier = try await transaction { [queue, target = configuration.url.target] in
            try await queue.runsWaiting(target: target)
        }.filter { !runIds.contains($0) }
        logger.info(
            "delivering this run's notifications to the app's webhook",
            metadata: ["upTo": "\(time.operatorText)", "runs": "\(runIds)", "earlierRuns": "\(earlier)"])
        _ = try await drain(runIds: runIds + earlier, upTo: time)
        return ForwardingDrain(
            own: try await summary(runIds: runIds), earlierRuns: earlier,
            earlier: earlier.isEmpty ? .init() : try await summary(runIds: earlier))
    }

    /// Delivers until this forwarder's deliveries of `runIds` (`nil`: the whole queue) are all
    /// delivered or failed, or `time` is up (retries are waited for within it); anything else
    /// that is due for its target is delivered on the way. Returns where the deliveries of
    /// `runIds` stand, whatever their target.
    package func drain(runIds: [Int64]?, upTo time: Duration) async throws -> ForwardQueue.ForwardingSummary {
        let (queue, target, clock) = (self.queue, configuration.url.target, configuration.clock)
        let deadline = clock.now + time
        try await reportOtherTargets()
        while clock.now < deadline, !Task.isCancelled {
            let pending = try await transaction { try await queue.pending(target: target, runIds: runIds) }
            guard pending > 0 else { break }
            if try await deliverDue() == 0 {
                try? await clock.sleep(for: min(.milliseconds(200), max(deadline - clock.now, .milliseconds(1))))
            }
        }
        return try await summary(runIds: runIds)
    }

    /// One pass over the deliveries of this forwarder's target that are due when it starts: each is
    /// sent once and its answer recorded (a failure with its backoff, so it waits in the queue for
    /// a later pass or worker); returns how many were sent. What falls due meanwhile (a retry, a new
    /// notification) is left for the next pass, so the pass ends whether or not the app answers.
    package func deliverOnePass() async throws -> Int {
        let queue = self.queue
        try await reportOtherTargets()
        // A dead forwarder's deliveries on this host are due now, and so in this pass.
        try await transaction { try await queue.release(where: ProcessIdentity.isDeadOnThisHost) }
        let dueBy = try await transaction { try await queue.databaseTime() }
        var sent = 0
        while !Task.isCancelled {
            let round = try await deliverDue(dueBy: dueBy)
            guard round > 0 else { break }
            sent += round
        }
        return sent
    }

    /// Logs, once per target, the deliveries that wait for another webhook than this forwarder's
    /// (and its companions'), and what delivers them; returns them.
    @discardableResult
    package func reportOtherTargets() async throws -> [(target: ForwardingTarget, pending: Int)] {
        let queue = self.queue
        let others = try await transaction { try await queue.waitingTargets() }.filter {
            $0.target.id != configuration.url.target.id && !configuration.companionTargets.contains($0.target.id)
        }
        let new = reportedTargets.withLock { reported in others.filter { reported.insert($0.target.id).inserted } }
        for (target, pending) in new {
            logger.warning(
                "deliveries wait for another webhook than this forwarder's; only a forwarder configured with that URL delivers them",
                metadata: [
                    "target": "\(target.redacted)", "pending": "\(pending)",
                    "do": "run `reconciler forward --once --forward-to <that URL> --forward-secret-file <its secret>`",
                ])
        }
        return others
    }

    /// Leases and sends due deliveries of this forwarder's target (with `dueBy`, only those due by
    /// then, by the database's clock), `concurrency` at a time and each only when it is about to be
    /// sent, up to `concurrency × 4` of them; returns how many were sent. Answers are recorded as
    /// they come and the leases in flight renewed beside them, one transaction at a time (one
    /// pooled connection).
    func deliverDue(dueBy: Date? = nil) async throws -> Int {
        let (queue, configuration, leases) = (self.queue, self.configuration, DeliveryLeases())
        try await transaction { try await queue.release(where: ProcessIdentity.isDeadOnThisHost) }
        return try await withThrowingTaskGroup(of: (ForwardQueue.Delivery, ForwardQueue.DeliveryResult?)?.self) { group in
            group.addTask {
                await renewLeases(leases)
                return nil
            }
            defer { group.cancelAll() }
            var (sent, inFlight, urgentInFlight) = (0, 0, false)
            while sent < configuration.concurrency * 4, !Task.isCancelled {
                if inFlight == configuration.concurrency {
                    try await recordNext(from: &group)
                    inFlight -= 1
                }
                // The turn first, then the lease: a delivery never waits for its turn while leased.
                await pacer.waitForTurn()
                let leasedAt = configuration.clock.now
                let token = UUID()
                guard
                    let delivery = try await transaction({
                        try await queue.lease(
                            target: configuration.url.target, worker: configuration.worker, token: token,
                            leaseDuration: configuration.leaseDuration, dueBy: dueBy)
                    })
                else { break }
                await leases.add(token, validUntil: leasedAt + configuration.leaseDuration)
                // Consumption requests before their deadline reach the app before anything else: the
                // first delivery of another kind waits (leased, its lease renewed) until they are answered.
                if !delivery.urgent, urgentInFlight {
                    while inFlight > 0 {
                        try await recordNext(from: &group)
                        inFlight -= 1
                    }
                    urgentInFlight = false
                }
                urgentInFlight = urgentInFlight || delivery.urgent
                group.addTask { (delivery, await sendWhileLeased(delivery, leases: leases)) }
                (sent, inFlight) = (sent + 1, inFlight + 1)
            }
            while inFlight > 0 {
                try await recordNext(from: &group)
                inFlight -= 1
            }
            return sent
        }
    }

    /// Waits for the next delivery to end and records its answer (the lease renewer never ends first).
    private func recordNext(
        from group: inout ThrowingTaskGroup<(ForwardQueue.Delivery, ForwardQueue.DeliveryResult?)?, any Error>
    ) async throws {
        while let next = try await group.next() {
            guard let (delivery, result) = next else { continue }
            if let result {
                try await record(delivery, result)
            } else {
                logger.warning(
                    "stopped a delivery whose lease was no longer certainly this forwarder's; another forwarder may send it",
                    metadata: ["notificationUUID": "\(delivery.notificationUUID)", "target": "\(delivery.target.redacted)"])
            }
            return
        }
    }

    /// Renews the leases in flight every quarter of the lease duration until cancelled; a lease
    /// the database no longer gives this forwarder is marked lost, and its request is cancelled.
    private func renewLeases(_ leases: DeliveryLeases) async {
        let configuration = self.configuration
        // A renewal that waits longer than its interval is no use: the next one tries again.
        let renewing = ForwardQueue(database: database.with(unavailableTimeout: configuration.leaseDuration / 4))
        while !Task.isCancelled {
            do {
                try await configuration.clock.sleep(for: configuration.leaseDuration / 4)
            } catch {
                return
            }
            let tokens = await leases.tokens()
            guard !tokens.isEmpty else { continue }
            let startedAt = configuration.clock.now
            do {
                let held = try await transaction {
                    try await renewing.renew(tokens, worker: configuration.worker, leaseDuration: configuration.leaseDuration)
                }
                await leases.renewed(tokens, held: held, validUntil: startedAt + configuration.leaseDuration)
            } catch {
                // Not renewed: the requests are cancelled before the leases can run out.
                logger.debug("could not renew the forwarding leases", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Sends `delivery` while its lease is certainly this forwarder's: the request is cancelled
    /// when the lease is lost or could run out (a quarter of its duration before it would); `nil`
    /// then, and the answer is not recorded.
    private func sendWhileLeased(_ delivery: ForwardQueue.Delivery, leases: DeliveryLeases) async -> ForwardQueue.DeliveryResult? {
        let (margin, clock) = (configuration.leaseDuration / 4, configuration.clock)
        let result = await withTaskGroup(of: ForwardQueue.DeliveryResult?.self) { group in
            group.addTask { await send(delivery) }
            group.addTask {
                await leases.waitUntilUncertain(delivery.leaseToken, margin: margin, clock: clock)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        await leases.remove(delivery.leaseToken)
        return result
    }

    private func record(_ delivery: ForwardQueue.Delivery, _ result: ForwardQueue.DeliveryResult) async throws {
        switch result {
        case .delivered: logger.debug("forwarded", metadata: ["notificationUUID": "\(delivery.notificationUUID)"])
        case .retry(let code, let error, _), .failed(let code, let error):
            logger.warning(
                "the app's webhook did not take a forwarded notification",
                metadata: [
                    "notificationUUID": "\(delivery.notificationUUID)", "target": "\(delivery.target.redacted)",
                    "status": "\(code.map(String.init) ?? "none")", "error": "\(error)", "attempt": "\(delivery.attempts + 1)",
                ])
        }
        let (queue, worker) = (self.queue, configuration.worker)
        let recorded = try await transaction { try await queue.record(delivery, worker: worker, result: result) }
        if !recorded {
            logger.warning(
                "the answer to a delivery was not recorded: its lease had passed to another forwarder",
                metadata: ["notificationUUID": "\(delivery.notificationUUID)"])
        }
    }

    func send(_ delivery: ForwardQueue.Delivery) async -> ForwardQueue.DeliveryResult {
        let body = Self.body(signedPayload: delivery.signedPayload)
        var request = HTTPClientRequest(url: configuration.url.value)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "User-Agent", value: "app-store-reconciler/1.0 (forwarding)")
        if let secret = configuration.secret {
            request.headers.add(name: "Reconciler-Signature", value: Self.signature(body: body, secret: secret, at: Date()))
        }
        // Queued again by `forward --redeliver`: the app may already have it (and acknowledged it).
        if delivery.redelivery { request.headers.add(name: "Reconciler-Redelivery", value: "1") }
        request.body = .bytes(ByteBuffer(data: body))
        let attempt = delivery.attempts + 1
        do {
            let response = try await httpClient.execute(request, timeout: .milliseconds(configuration.timeout.milliseconds))
            _ = try? await response.body.collect(upTo: 64 * 1024)
            let status = Int(response.status.code)
            if (200..<300).contains(status) { return .delivered(statusCode: status) }
            return outcome(ofFailedAttempt: attempt, statusCode: status, error: "HTTP \(status)")
        } catch {
            // Plain words and the redacted URL: "connection refused by https://app.internal/apple".
            return outcome(
                ofFailedAttempt: attempt, statusCode: nil,
                error: DeliveryFailure.describe(error, target: configuration.url.target, timeout: configuration.timeout))
        }
    }

    private func outcome(ofFailedAttempt attempt: Int, statusCode: Int?, error: String) -> ForwardQueue.DeliveryResult {
        guard attempt < configuration.maximumAttempts else { return .failed(statusCode: statusCode, error: error) }
        return .retry(statusCode: statusCode, error: error, after: configuration.backoff(afterAttempt: attempt))
    }

    /// Apple's body, exactly: `{"signedPayload":"..."}`.
    static func body(signedPayload: String) -> Data {
        (try? JSONEncoder().encode(["signedPayload": signedPayload])) ?? Data()
    }

    /// `t=<UNIX seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`.
    package static func signature(body: Data, secret: ForwardingSecret, at time: Date) -> String {
        let timestamp = String(Int64(time.timeIntervalSince1970))
        let mac = HMAC<SHA256>.authenticationCode(
            for: Data(timestamp.utf8) + Data(".".utf8) + body, using: SymmetricKey(data: Data(secret.value.utf8)))
        return "t=\(timestamp),v1=" + mac.map { String(format: "%02x", $0) }.joined()
    }
}

/// The shared secret of forwarded deliveries' signatures; it prints as `<redacted>` wherever it
/// is interpolated, so no log line or report can carry it. Two are equal when they sign alike.
package struct ForwardingSecret: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    let value: String

    package init(_ value: String) { self.value = value }

    package var description: String { "<redacted>" }
    package var debugDescription: String { "ForwardingSecret(<redacted>)" }
}

/// The leases of the deliveries one ``Forwarder/deliverDue()`` has in flight: until when each is
/// certainly this forwarder's (by this process's clock, the forwarder's configured one: the
/// database's `lease_until` is at least that late), or that it is lost.
actor DeliveryLeases {
    private var validUntil: [UUID: Duration] = [:]

    func add(_ token: UUID, validUntil instant: Duration) { validUntil[token] = instant }

    func remove(_ token: UUID) { validUntil[token] = nil }

    func tokens() -> [UUID] { Array(validUntil.keys) }

    /// After a renewal of `tokens` that began before `instant` minus the lease duration: those the
    /// database gave back are valid until `instant`; the others are lost.
    func renewed(_ tokens: [UUID], held: Set<UUID>, validUntil instant: Duration) {
        for token in tokens where validUntil[token] != nil {
            validUntil[token] = held.contains(token) ? max(validUntil[token]!, instant) : nil
        }
    }

    /// When a request under `token` must stop (`margin` before the lease could run out); `nil`
    /// when the lease is lost.
    func cutoff(_ token: UUID, margin: Duration) -> Duration? { validUntil[token].map { $0 - margin } }

    /// Returns when a request under `token` must stop: at its cutoff (`margin` before the lease
    /// could run out, on `clock`), or within half the margin after a renewal marked it lost; or
    /// when cancelled.
    nonisolated func waitUntilUncertain(_ token: UUID, margin: Duration, clock: any MonotonicClock) async {
        while !Task.isCancelled {
            // The time first: a renewal that marks the lease lost after it was read wakes this
            // wait within half the margin of that time.
            let now = clock.now
            guard let cutoff = await cutoff(token, margin: margin), now < cutoff else { return }
            try? await clock.sleep(until: min(cutoff, now + margin / 2))
        }
    }
}

/// Runs one body at a time, in the order they came, without blocking a thread.
final class OneAtATime: Sendable {
    private let state = Locked<(busy: Bool, waiting: [CheckedContinuation<Void, Never>])>((false, []))

    func run<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        await withCheckedContinuation { (turn: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state in
                if state.busy { state.waiting.append(turn) }
                defer { state.busy = true }
                return !state.busy
            }
            if now { turn.resume() }
        }
        defer {
            // The next in line gets the turn; the state stays busy for it.
            let next = state.withLock { state in
                state.busy = !state.waiting.isEmpty
                return state.waiting.isEmpty ? nil : state.waiting.removeFirst()
            }
            next?.resume()
        }
        return try await body()
    }
}

/// Spaces the start of deliveries to a rate, on `clock`.
actor Pacer {
    private let interval: Duration?
    private let clock: any MonotonicClock
    private var next: Duration

    init(perSecond: Double?, clock: any MonotonicClock) {
        interval = perSecond.flatMap { $0 > 0 ? .nanoseconds(Int64(1_000_000_000 / $0)) : nil }
        self.clock = clock
        next = clock.now
    }

    func waitForTurn() async {
        guard let interval else { return }
        let now = clock.now
        let slot = max(next, now)
        next = slot + interval
        if slot > now { try? await clock.sleep(until: slot) }
    }
}
