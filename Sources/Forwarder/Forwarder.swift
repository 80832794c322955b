import AsyncHTTPClient
import Crypto
import Foundation
import Logging
import NIOCore
import NIOFoundationCompat
import Reconciler

/// Delivers queued notifications to the app's own webhook, as Apple would have: a POST of Apple's
/// exact body `{"signedPayload": "..."}`, so the app's handler processes it as if Apple had sent
/// it. A 2xx is recorded and the delivery is never sent again; any other answer or no answer
/// (a timeout) is retried with exponential backoff up to `maximumAttempts`, then marked failed.
/// Deliveries are leased from PostgreSQL (several forwarders share the queue) and sent with no
/// transaction open; a forwarder killed after sending but before recording the answer leaves the
/// delivery to be sent again when its lease runs out: at-least-once, like Apple's own delivery
/// (apps already dedup by notificationUUID).
///
/// With a secret, each delivery carries `Reconciler-Signature: t=<UNIX seconds>,v1=<hex>`, the
/// HMAC-SHA256 of `"<t>.<body>"` with the secret, so the app can tell these deliveries from
/// strangers' (and refuse old ones by `t`).
///
/// ```swift
/// let forwarder = Forwarder(configuration: .init(secret: secret), database: database)
/// let left = try await forwarder.drain(runId: run.runId, upTo: .seconds(60))
/// ```
public struct Forwarder: Sendable {
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
        /// The shared secret of the `Reconciler-Signature` header (never logged).
        public var secret: String?
        /// Names this process in the queue.
        public var worker: String

        public init(concurrency: Int = 4, requestsPerSecond: Double? = nil, timeout: Duration = .seconds(10), maximumAttempts: Int = 12,
                    initialBackoff: Duration = .seconds(5), maximumBackoff: Duration = .seconds(3600), secret: String? = nil,
                    worker: String = ProcessIdentity.current) {
            self.concurrency = concurrency
            self.requestsPerSecond = requestsPerSecond
            self.timeout = timeout
            self.maximumAttempts = maximumAttempts
            self.initialBackoff = initialBackoff
            self.maximumBackoff = maximumBackoff
            self.secret = secret
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

    /// Delivers what is due, and what falls due, until cancelled (`serve --forward-to`, `forward`).
    public func run(pollInterval: Duration = .seconds(1)) async throws {
        while !Task.isCancelled {
            let sent = try await deliverDue()
            if sent == 0 { try await Task.sleep(for: pollInterval) }
        }
    }

    /// Delivers until the run's queued notifications are all delivered or failed, or `time` is
    /// up (retries are waited for within it); returns where the run's deliveries stand.
    public func drain(runId: Int64?, upTo time: Duration) async throws -> PurchaseStore.ForwardingSummary {
        let deadline = ContinuousClock.now + time
        while true {
            let summary = try await database.transaction { [store] in try await store.forwardingSummary(runId: runId, on: $0) }
            guard summary.pending > 0, ContinuousClock.now < deadline else { return summary }
            if try await deliverDue() == 0 { try await Task.sleep(for: .milliseconds(500)) }
        }
    }

    /// Leases what is due and delivers it, `concurrency` at a time; returns how many were sent.
    func deliverDue() async throws -> Int {
        let (store, configuration) = (self.store, self.configuration)
        let batch = try await database.transaction { connection in
            try await store.leaseDeliveries(worker: configuration.worker, limit: configuration.concurrency * 4, leaseDuration: configuration.timeout * 3,
                                            on: connection)
        }
        guard !batch.isEmpty else { return 0 }
        try await withThrowingTaskGroup(of: Void.self) { group in
            var next = batch.makeIterator()
            for _ in 0..<min(configuration.concurrency, batch.count) {
                if let delivery = next.next() { group.addTask { try await deliver(delivery) } }
            }
            while try await group.next() != nil {
                if let delivery = next.next() { group.addTask { try await deliver(delivery) } }
            }
        }
        return batch.count
    }

    /// Sends one delivery and records the answer.
    private func deliver(_ delivery: PurchaseStore.Delivery) async throws {
        await pacer.waitForTurn()
        let result = await send(delivery)
        switch result {
        case .delivered: logger.debug("forwarded", metadata: ["notificationUUID": "\(delivery.notificationUUID)"])
        case .retry(let code, let error, _), .failed(let code, let error):
            logger.warning("the app's webhook did not take a forwarded notification", metadata: [
                "notificationUUID": "\(delivery.notificationUUID)", "status": "\(code.map(String.init) ?? "none")", "error": "\(error)",
            ])
        }
        let (store, worker) = (self.store, configuration.worker)
        try await database.transaction { try await store.recordDelivery(delivery, worker: worker, result: result, on: $0) }
    }

    func send(_ delivery: PurchaseStore.Delivery) async -> PurchaseStore.DeliveryResult {
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
            let response = try await httpClient.execute(request, timeout: .nanoseconds(Int64(configuration.timeout.components.seconds) * 1_000_000_000
                + configuration.timeout.components.attoseconds / 1_000_000_000))
            _ = try? await response.body.collect(upTo: 64 * 1024)
            let status = Int(response.status.code)
            if (200..<300).contains(status) { return .delivered(statusCode: status) }
            return outcome(ofFailedAttempt: attempt, statusCode: status, error: "HTTP \(status)")
        } catch {
            return outcome(ofFailedAttempt: attempt, statusCode: nil, error: String(describing: type(of: error)) + ": \(error)")
        }
    }

    private func outcome(ofFailedAttempt attempt: Int, statusCode: Int?, error: String) -> PurchaseStore.DeliveryResult {
        guard attempt < configuration.maximumAttempts else { return .failed(statusCode: statusCode, error: error) }
        let delay = min(configuration.initialBackoff * (1 << min(attempt - 1, 20)), configuration.maximumBackoff)
        return .retry(statusCode: statusCode, error: error, after: delay)
    }

    /// Apple's body, exactly: `{"signedPayload":"..."}`.
    static func body(signedPayload: String) -> Data {
        (try? JSONEncoder().encode(["signedPayload": signedPayload])) ?? Data()
    }

    /// `t=<UNIX seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`.
    public static func signature(body: Data, secret: String, at time: Date) -> String {
        let timestamp = String(Int64(time.timeIntervalSince1970))
        let mac = HMAC<SHA256>.authenticationCode(for: Data(timestamp.utf8) + Data(".".utf8) + body, using: SymmetricKey(data: Data(secret.utf8)))
        return "t=\(timestamp),v1=" + mac.map { String(format: "%02x", $0) }.joined()
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
