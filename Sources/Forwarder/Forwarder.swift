import AsyncHTTPClient
import Crypto
import Foundation
import Logging
import NIOCore
import NIOFoundationCompat
import Reconciler
import ServiceLifecycle

/// Delivers queued notifications to the app's own webhook, as Apple would have: a POST of Apple's
/// exact body `{"signedPayload": "..."}`, so the app's handler processes it as if Apple had sent
/// it. A 2xx is recorded and the delivery is never sent again; any other answer or no answer
/// (a timeout) is retried with exponential backoff up to `maximumAttempts`, then marked failed.
/// Deliveries are leased from PostgreSQL (several forwarders share the queue) and sent with no
/// transaction open; a forwarder killed after sending but before recording the answer leaves the
/// delivery to be sent again when its lease runs out (at once when it died on this host):
/// at-least-once, like Apple's own delivery (apps already dedup by notificationUUID).
///
/// With a secret, each delivery carries `Reconciler-Signature: t=<UNIX seconds>,v1=<hex>`, the
/// HMAC-SHA256 of `"<t>.<body>"` with the secret, so the app can tell these deliveries from
/// strangers' (and refuse old ones by `t`).
///
/// As a `Service` it delivers until a graceful shutdown (`serve --forward-to`, `forward`);
/// ``drain(runIds:upTo:)`` delivers one run's notifications before the run ends.
///
/// ```swift
/// let forwarder = Forwarder(configuration: .init(secret: ForwardingSecret("s3cret")), database: database)
/// let left = try await forwarder.drain(runIds: [run.runId], upTo: .seconds(60))
/// ```
public struct Forwarder: Service, Sendable {
    public struct Configuration: Sendable {
        /// Deliveries in flight at once.
        public var concurrency: Int
        /// Deliveries started per second at most (`nil`: no limit).
        public var requestsPerSecond: Double?
        /// How long the app may take to answer.
        public var timeout: Duration
        /// Tries before a delivery is marked failed.
        public var maximumAttempts: Int
        /// The first retry's delay; each further one doubles, up to `maximumBackoff`.
        public var initialBackoff: Duration
        public var maximumBackoff: Duration
        /// The shared secret of the `Reconciler-Signature` header.
        public var secret: ForwardingSecret?
        /// How often an idle forwarder looks for due deliveries.
        public var pollInterval: Duration
        /// Names this process in the queue.
        public var worker: String

        public init(
            concurrency: Int = 4, requestsPerSecond: Double? = nil, timeout: Duration = .seconds(10), maximumAttempts: Int = 12,
            initialBackoff: Duration = .seconds(5), maximumBackoff: Duration = .seconds(3600), secret: ForwardingSecret? = nil,
            pollInterval: Duration = .seconds(1), worker: String = ProcessIdentity.current
        ) {
            self.concurrency = concurrency
            self.requestsPerSecond = requestsPerSecond
            self.timeout = timeout
            self.maximumAttempts = maximumAttempts
            self.initialBackoff = initialBackoff
            self.maximumBackoff = maximumBackoff
            self.secret = secret
            self.pollInterval = pollInterval
            self.worker = worker
        }
    }

    public let configuration: Configuration
    let database: Database
    let store: PurchaseStore
    let httpClient: HTTPClient
    let logger: Logger
    let pacer: Pacer

    public init(configuration: Configuration, database: Database, httpClient: HTTPClient = .shared) {
        self.configuration = configuration
        self.database = database
        self.store = PurchaseStore(logger: database.logger)
        self.httpClient = httpClient
        self.logger = database.logger
        self.pacer = Pacer(perSecond: configuration.requestsPerSecond)
    }

    /// Delivers what is due, and what falls due, until a graceful shutdown or cancellation; a
    /// database that stays away is logged and waited for, not fatal (the queue is durable).
    public func run() async throws {
        await run(until: { Task.isShuttingDownGracefully })
    }

    /// Delivers until `isStopping` says so (checked between batches, so deliveries in flight
    /// finish and their answers are recorded) or the task is cancelled.
    public func run(until isStopping: @escaping @Sendable () -> Bool) async {
        while !Task.isCancelled, !isStopping() {
            var sent = 0
            do {
                sent = try await deliverDue()
            } catch is CancellationError {
                return
            } catch {
                logger.warning("forwarding paused: the queue could not be read", metadata: ["error": "\(error)"])
            }
            guard sent == 0 else { continue }
            // Idle: look again after the poll interval, or sooner when asked to stop.
            let wake = ContinuousClock.now + configuration.pollInterval
            while ContinuousClock.now < wake, !isStopping() {
                do {
                    try await Task.sleep(for: min(.milliseconds(100), wake - ContinuousClock.now))
                } catch {
                    return
                }
            }
        }
    }

    /// Where the deliveries of `runIds` stand (`nil`: the whole queue).
    public func summary(runIds: [Int64]?) async throws -> PurchaseStore.ForwardingSummary {
        try await database.transaction { [store] in try await store.forwardingSummary(runIds: runIds, on: $0) }
    }

    /// Delivers until the deliveries of `runIds` (`nil`: the whole queue) are all delivered or
    /// failed, or `time` is up (retries are waited for within it); anything else that is due is
    /// delivered on the way. Returns where those deliveries stand.
    public func drain(runIds: [Int64]?, upTo time: Duration) async throws -> PurchaseStore.ForwardingSummary {
        let deadline = ContinuousClock.now + time
        while true {
            let summary = try await summary(runIds: runIds)
            guard summary.pending > 0, ContinuousClock.now < deadline, !Task.isCancelled else { return summary }
            if try await deliverDue() == 0 {
                try? await Task.sleep(for: min(.milliseconds(200), max(deadline - ContinuousClock.now, .milliseconds(1))))
            }
        }
    }

    /// Leases what is due and delivers it, `concurrency` at a time; returns how many were sent.
    /// Only the sends run concurrently: answers are recorded one at a time as they come, so the
    /// forwarder needs one pooled connection at a time.
    func deliverDue() async throws -> Int {
        let (store, configuration) = (self.store, self.configuration)
        let batch = try await database.transaction { connection in
            try await store.releaseDeliveries(where: ProcessIdentity.isDeadOnThisHost, on: connection)
            return try await store.leaseDeliveries(
                worker: configuration.worker, limit: configuration.concurrency * 4, leaseDuration: configuration.timeout * 3, on: connection)
        }
        guard !batch.isEmpty else { return 0 }
        try await withThrowingTaskGroup(of: (PurchaseStore.Delivery, PurchaseStore.DeliveryResult).self) { group in
            var next = batch.makeIterator()
            for _ in 0..<min(configuration.concurrency, batch.count) {
                if let delivery = next.next() { group.addTask { (delivery, await send(delivery)) } }
            }
            while let (delivery, result) = try await group.next() {
                try await record(delivery, result)
                if let delivery = next.next() { group.addTask { (delivery, await send(delivery)) } }
            }
        }
        return batch.count
    }

    private func record(_ delivery: PurchaseStore.Delivery, _ result: PurchaseStore.DeliveryResult) async throws {
        switch result {
        case .delivered: logger.debug("forwarded", metadata: ["notificationUUID": "\(delivery.notificationUUID)"])
        case .retry(let code, let error, _), .failed(let code, let error):
            logger.warning(
                "the app's webhook did not take a forwarded notification",
                metadata: [
                    "notificationUUID": "\(delivery.notificationUUID)", "target": "\(ForwardingTarget.redacted(delivery.targetURL))",
                    "status": "\(code.map(String.init) ?? "none")", "error": "\(error)", "attempt": "\(delivery.attempts + 1)",
                ])
        }
        let (store, worker) = (self.store, configuration.worker)
        try await database.transaction { try await store.recordDelivery(delivery, worker: worker, result: result, on: $0) }
    }

    func send(_ delivery: PurchaseStore.Delivery) async -> PurchaseStore.DeliveryResult {
        await pacer.waitForTurn()
        let body = Self.body(signedPayload: delivery.signedPayload)
        var request = HTTPClientRequest(url: delivery.targetURL)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "User-Agent", value: "app-store-reconciler/1.0 (forwarding)")
        if let secret = configuration.secret {
            request.headers.add(name: "Reconciler-Signature", value: Self.signature(body: body, secret: secret, at: Date()))
        }
        request.body = .bytes(ByteBuffer(data: body))
        let attempt = delivery.attempts + 1
        do {
            let response = try await httpClient.execute(request, timeout: .milliseconds(configuration.timeout.milliseconds))
            _ = try? await response.body.collect(upTo: 64 * 1024)
            let status = Int(response.status.code)
            if (200..<300).contains(status) { return .delivered(statusCode: status) }
            return outcome(ofFailedAttempt: attempt, statusCode: status, error: "HTTP \(status)")
        } catch {
            // The error names the failure (timeout, refused), never the URL's credentials.
            return outcome(ofFailedAttempt: attempt, statusCode: nil, error: String(describing: type(of: error)) + ": " + Self.brief(error))
        }
    }

    private func outcome(ofFailedAttempt attempt: Int, statusCode: Int?, error: String) -> PurchaseStore.DeliveryResult {
        guard attempt < configuration.maximumAttempts else { return .failed(statusCode: statusCode, error: error) }
        let delay = min(configuration.initialBackoff * (1 << min(attempt - 1, 20)), configuration.maximumBackoff)
        return .retry(statusCode: statusCode, error: error, after: delay)
    }

    private static func brief(_ error: any Error) -> String {
        if let error = error as? HTTPClientError { return "\(error)" }
        return (error as NSError).localizedDescription
    }

    /// Apple's body, exactly: `{"signedPayload":"..."}`.
    static func body(signedPayload: String) -> Data {
        (try? JSONEncoder().encode(["signedPayload": signedPayload])) ?? Data()
    }

    /// `t=<UNIX seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`.
    public static func signature(body: Data, secret: ForwardingSecret, at time: Date) -> String {
        let timestamp = String(Int64(time.timeIntervalSince1970))
        let mac = HMAC<SHA256>.authenticationCode(
            for: Data(timestamp.utf8) + Data(".".utf8) + body, using: SymmetricKey(data: Data(secret.value.utf8)))
        return "t=\(timestamp),v1=" + mac.map { String(format: "%02x", $0) }.joined()
    }
}

/// The shared secret of forwarded deliveries' signatures; it prints as `<redacted>` wherever it
/// is interpolated, so no log line or report can carry it.
public struct ForwardingSecret: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    let value: String

    public init(_ value: String) { self.value = value }

    public var description: String { "<redacted>" }
    public var debugDescription: String { "ForwardingSecret(<redacted>)" }
}

/// The app's webhook URL as logs and reports show it: scheme, host, port and path, without the
/// user, password or query a URL may carry as credentials.
public enum ForwardingTarget {
    public static func redacted(_ url: String) -> String {
        guard var components = URLComponents(string: url) else { return "<invalid URL>" }
        if components.user != nil || components.password != nil { (components.user, components.password) = ("…", nil) }
        if components.query != nil { components.query = "…" }
        components.fragment = nil
        return components.string ?? "<invalid URL>"
    }
}

/// Spaces the start of deliveries to a rate.
actor Pacer {
    private let interval: Duration?
    private var next = ContinuousClock.now

    init(perSecond: Double?) {
        interval = perSecond.flatMap { $0 > 0 ? .nanoseconds(Int64(1_000_000_000 / $0)) : nil }
    }

    func waitForTurn() async {
        guard let interval else { return }
        let now = ContinuousClock.now
        let slot = max(next, now)
        next = slot + interval
        if slot > now { try? await Task.sleep(until: slot, clock: .continuous) }
    }
}

extension Duration {
    /// Whole milliseconds.
    var milliseconds: Int64 { components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000 }
}
