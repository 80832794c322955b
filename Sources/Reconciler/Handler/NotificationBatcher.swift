import AppStoreServer
package import Logging
package import ReconcilerDomain
package import ReconcilerStore
package import ServiceLifecycle
import Synchronization

/// Applies live notifications that arrive together in one transaction each batch, as a replayed
/// page is applied, instead of one transaction per request: a transaction's fixed cost (its
/// statements planned, its commit's WAL flush) is shared by every notification of the batch.
///
/// Nothing waits to fill a batch: a notification is applied at once when no batch is being applied,
/// and those that arrive meanwhile form the next batch (group commit). A second batch starts beside
/// one being applied only once ``Configuration/overlapAt`` notifications wait: overlapping small
/// batches would pay a transaction's fixed cost for each of a few notifications. A request is
/// answered once its batch has committed, so "stored" still means stored. The rules are the
/// handler's (dedup by `notificationUUID`, each part of a purchase keeps its newest version), a
/// batch holds at most one notification of each purchase (a second one waits for the next batch),
/// and a purchase whose notification is in a batch being applied is left out of the batches that
/// start meanwhile (its later notifications wait for that batch to end: two batches applied at
/// once could commit in either order), so outcomes (`stale` included) and the change feed's rows
/// are those of applying the notifications one by one in the order they arrived. When a batch
/// fails for any reason but an unreachable database or a shutdown, each of its notifications is
/// applied again alone, so one that cannot be stored never refuses the others; when the database
/// is unreachable, everything waiting for the same app is answered with that failure at once
/// (Apple delivers it again), and at most ``Configuration/maximumWaiting`` notifications wait at
/// all.
///
/// Run it as a service beside the server that calls it (``WebhookServer`` does):
///
/// ```swift
/// let batcher = NotificationBatcher(logger: logger)
/// let result = try await batcher.handle(notification, by: handler, forwarding: nil)   // in a request
/// ```
package final class NotificationBatcher: Service, Sendable {
    package struct Configuration: Sendable {
        /// At most this many notifications in one transaction.
        package var maximumBatch: Int
        /// Batches applied at once (each on one pooled connection): while one waits for its commit's
        /// flush, another is built and sent.
        package var workers: Int
        /// A batch starts while another is being applied only when at least this many notifications
        /// wait. In the webhook bench (16 senders, 2 cores), two workers each taking what waited
        /// applied 4.4 notifications per transaction (643/s); one worker, 7.9, but its batches
        /// waited on each other's round trips (607/s); 8 here: 6.8 and 736/s, 15% less CPU per
        /// notification than without it (4: 5.1 and 708/s).
        package var overlapAt: Int
        /// Beyond this many waiting notifications a request is refused at once (``ReconcilerError/Code/overloaded``,
        /// a 503 Apple retries) rather than queued without bound while the database is slow.
        package var maximumWaiting: Int

        package init(maximumBatch: Int = 64, workers: Int = 2, overlapAt: Int = 8, maximumWaiting: Int = 4_096) {
            self.maximumBatch = max(1, maximumBatch)
            self.workers = max(1, workers)
            self.overlapAt = max(1, overlapAt)
            self.maximumWaiting = max(1, maximumWaiting)
        }
    }

    /// One request's notification, waiting for its batch.
    private struct Waiting {
        var notification: VerifiedNotification
        var handler: NotificationHandler
        var forwarding: NotificationLog.Forwarding?
        var answer: CheckedContinuation<HandlingResult, any Error>

        /// Notifications of one app and the same forwarding targets share a transaction.
        var key: Key { Key(target: handler.verifier.configuration.target, forwardingRoutes: forwarding?.routes ?? []) }

        /// The purchase the notification is of, if any.
        var purchase: Purchase? {
            notification.originalTransactionId.map { Purchase(target: handler.verifier.configuration.target, originalTransactionId: $0) }
        }
    }

    private struct Key: Hashable {
        var target: AppTarget
        var forwardingRoutes: [ForwardingRoute]
    }

    /// One purchase of one app and environment.
    private struct Purchase: Hashable {
        var target: AppTarget
        var originalTransactionId: String
    }

    private struct State {
        var waiting: [Waiting] = []
        var idleWorkers: [CheckedContinuation<[Waiting]?, Never>] = []
        var stopping = false
        /// Batches taken and not applied yet.
        var applying = 0
        /// The purchases of the notifications in those batches: none of them joins another batch
        /// until its batch ended.
        var inFlight = Set<Purchase>()

        /// The next batch if one may start now (none is being applied, or `overlapAt` wait).
        mutating func startBatch(_ configuration: Configuration) -> [Waiting]? {
            guard applying == 0 || waiting.count >= configuration.overlapAt, let batch = takeBatch(limit: configuration.maximumBatch) else {
                return nil
            }
            applying += 1
            return batch
        }

        /// The oldest waiting notification whose purchase is in no batch being applied, and those
        /// of its app after it, up to `limit`, in order, at most one of each purchase and none of
        /// a purchase in flight (a purchase's later notifications keep their order for the next
        /// batches); `nil` when every waiting notification's purchase is in flight (the batch that
        /// holds it takes them once it ends).
        mutating func takeBatch(limit: Int) -> [Waiting]? {
            let inFlight = self.inFlight
            guard let key = waiting.first(where: { $0.purchase.map { !inFlight.contains($0) } ?? true })?.key else { return nil }
            var batch: [Waiting] = []
            var rest: [Waiting] = []
            for item in waiting {
                let purchase = item.purchase
                if batch.count < limit, item.key == key, purchase.map({ !self.inFlight.contains($0) }) ?? true {
                    batch.append(item)
                    if let purchase { self.inFlight.insert(purchase) }
                } else {
                    rest.append(item)
                }
            }
            waiting = rest
            return batch
        }

        /// A batch taken by ``takeBatch(limit:)`` was applied: its purchases may join the next.
        mutating func finish(_ batch: [Waiting]) {
            applying -= 1
            for item in batch {
                if let purchase = item.purchase { inFlight.remove(purchase) }
            }
        }

        /// Everything waiting for `key` (its app is failing as a whole).
        mutating func takeAll(of key: Key) -> [Waiting] {
            let taken = waiting.filter { $0.key == key }
            waiting.removeAll { $0.key == key }
            return taken
        }
    }

    package let configuration: Configuration
    let logger: Logger
    private let state = Mutex(State())
    private let batches = Atomic<Int>(0)

    /// How many notifications wait for a worker now (for tests).
    package var waiting: Int { state.withLock { $0.waiting.count } }
    /// How many batches were applied in one transaction each (for tests and benchmarks).
    package var appliedBatches: Int { batches.load(ordering: .relaxed) }

    package init(configuration: Configuration = .init(), logger: Logger) {
        self.configuration = configuration
        self.logger = logger
    }

    /// Applies `notification` with `handler` in the next batch and returns once that batch
    /// committed. Throws what the handler throws for it, or ``ReconcilerError/Code/stopping`` when
    /// the batcher no longer runs (the notification was not stored: Apple delivers it again).
    package func handle(
        _ notification: VerifiedNotification, by handler: NotificationHandler, forwarding: NotificationLog.Forwarding?
    ) async throws -> HandlingResult {
        try await withCheckedThrowingContinuation { answer in
            let item = Waiting(notification: notification, handler: handler, forwarding: forwarding, answer: answer)
            enum Next {
                case refuse(Waiting, ReconcilerError)
                case wake(CheckedContinuation<[Waiting]?, Never>, [Waiting])
                case wait
            }
            let next: Next = state.withLock { state in
                guard !state.stopping else { return .refuse(item, Self.stoppingError) }
                guard state.waiting.count < configuration.maximumWaiting else { return .refuse(item, Self.overloadedError) }
                state.waiting.append(item)
                guard !state.idleWorkers.isEmpty, let batch = state.startBatch(configuration) else { return .wait }
                return .wake(state.idleWorkers.removeLast(), batch)
            }
            switch next {
            case .refuse(let item, let error): item.answer.resume(throwing: error)
            case .wake(let worker, let batch): worker.resume(returning: batch)
            case .wait: break
            }
        }
    }

    /// Runs the workers until graceful shutdown or cancellation; what is waiting then is applied
    /// (once cancelled, failed with the cancellation) before it returns.
    package func run() async throws {
        await withTaskCancellationHandler {
            await withDiscardingTaskGroup { group in
                for _ in 0..<configuration.workers {
                    group.addTask { await self.work() }
                }
                // Returns on graceful shutdown, throws on cancellation: either way the workers
                // finish what waits and stop.
                try? await gracefulShutdown()
                stop()
            }
        } onCancel: {
            stop()
        }
        // Nothing is left waiting: workers stop only once stopping is set and nothing waits, and a
        // request that arrives after that is refused in `handle`.
    }

    private static var stoppingError: ReconcilerError {
        ReconcilerError(.stopping, "the process is stopping: the notification was not stored")
    }

    private static var overloadedError: ReconcilerError {
        ReconcilerError(.overloaded, "too many notifications wait for the database: the notification was not stored")
    }

    private func stop() {
        let idle = state.withLock { state in
            state.stopping = true
            defer { state.idleWorkers.removeAll() }
            return state.idleWorkers
        }
        for worker in idle { worker.resume(returning: nil) }
    }

    private func work() async {
        while let batch = await nextBatch() {
            await apply(batch)
            state.withLock { $0.finish(batch) }
        }
    }

    /// The next batch, waiting for one; `nil` once stopping and nothing waits.
    private func nextBatch() async -> [Waiting]? {
        await withCheckedContinuation { worker in
            let ready: [Waiting]?? = state.withLock { state in
                if let batch = state.startBatch(configuration) { return .some(batch) }
                // Stopping, this worker ends; what still waits is taken by the one applying a batch
                // (a notification left waiting while stopping is of a purchase in a batch being applied).
                if state.stopping { return .some(nil) }
                state.idleWorkers.append(worker)
                return .none
            }
            if let ready { worker.resume(returning: ready) }
        }
    }

    private func apply(_ batch: [Waiting]) async {
        let (handler, forwarding) = (batch[0].handler, batch[0].forwarding)
        do {
            let results = try await handler.record(batch.map(\.notification), source: .webhook, forwarding: forwarding)
            batches.add(1, ordering: .relaxed)
            for (item, result) in zip(batch, results) { item.answer.resume(returning: result) }
        } catch {
            guard !Self.failsEveryNotification(error) else {
                // What waits for the same app would wait as long for the same failure.
                let waiting = state.withLock { $0.takeAll(of: batch[0].key) }
                for item in batch + waiting { item.answer.resume(throwing: error) }
                return
            }
            guard batch.count > 1 else {
                batch[0].answer.resume(throwing: error)
                return
            }
            logger.warning(
                "a batch of live notifications failed; applying each alone",
                metadata: ["notifications": "\(batch.count)", "error": "\(Database.operatorDescription(of: error))"])
            for item in batch {
                do {
                    item.answer.resume(returning: try await handler.handle(item.notification, source: .webhook, forwarding: forwarding))
                } catch {
                    item.answer.resume(throwing: error)
                }
            }
        }
    }

    /// Errors that are no verdict on any one notification: applying each alone would only wait
    /// for the same failure once per notification.
    private static func failsEveryNotification(_ error: any Error) -> Bool {
        error is CancellationError || (error as? ReconcilerError)?.code == .databaseUnavailable
    }
}
