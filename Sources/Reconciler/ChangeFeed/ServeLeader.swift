package import AppStoreServer
import Foundation
package import Logging
package import ReconcilerDomain
package import ReconcilerShared
package import ReconcilerStore
package import ServiceLifecycle

/// The one replica of `serve` that does what no two may do at once: every tick it takes or
/// renews the lease row `leader` (``RunLedger/holdServeLease(_:holder:duration:)``) and, while it
/// holds it, writes the `time` rows that fell due (``TimeRowWriter``) and sends the automatic
/// consumption answers that fell due (``ConsumptionResponder/answerDue(_:clock:database:)``, for
/// the apps whose policy says `automatic: true`). A replica that stops renewing (killed, cut off)
/// loses the lease after ``Configuration/leaseDuration`` and another takes over at its next tick.
///
/// ```swift
/// let leader = ServeLeader(
///     configuration: .init(), writer: TimeRowWriter(scopes: scopes, database: database), consumption: targets, logger: logger)
/// let services: [any Service] = [database, leader]
/// ```
package struct ServeLeader: Service {
    package struct Configuration: Sendable {
        /// How often the leader looks for due rows (a row lands within two intervals of its moment).
        package var interval: Duration
        /// How long the lease lasts without renewal: two intervals, so one late tick loses nothing.
        package var leaseDuration: Duration
        /// Names this process in the lease row.
        package var holder: String
        /// The clock ticks are spaced by.
        package var clock: any MonotonicClock
        /// The moment rows and answers fall due by (the wall clock; tests move their own).
        package var now: @Sendable () -> Timestamp

        package init(
            interval: Duration = .seconds(60), leaseDuration: Duration? = nil, holder: String = ProcessIdentity.current,
            clock: any MonotonicClock = .system, now: @escaping @Sendable () -> Timestamp = { .now }
        ) {
            self.interval = interval
            self.leaseDuration = leaseDuration ?? interval * 2
            self.holder = holder
            self.clock = clock
            self.now = now
        }
    }

    /// What one tick did.
    package struct Tick: Sendable {
        /// Whether this replica held the lease (it did nothing else when it did not).
        package var leads: Bool
        /// The `time` rows it wrote.
        package var written: [PurchaseChange] = []
        /// The automatic consumption answers it sent (nothing planned when no app answers automatically).
        package var answers: ConsumptionResponder.Outcome = .init(plan: .init())
    }

    /// The lease's name in `serve_leases`.
    package static let leaseName = "leader"

    package let configuration: Configuration
    package let writer: TimeRowWriter
    /// The apps with a consumption policy (only those that say `automatic: true` are answered).
    package let consumption: [ConsumptionResponder.Target]
    package let logger: Logger

    package init(configuration: Configuration, writer: TimeRowWriter, consumption: [ConsumptionResponder.Target] = [], logger: Logger) {
        self.configuration = configuration
        self.writer = writer
        self.consumption = consumption
        self.logger = logger
    }

    /// One tick: whether this replica leads, and what it did (nothing when it does not).
    package func tick() async throws -> Tick {
        let ledger = RunLedger(database: writer.database)
        guard try await ledger.holdServeLease(Self.leaseName, holder: configuration.holder, duration: configuration.leaseDuration) else {
            return Tick(leads: false)
        }
        var tick = Tick(leads: true)
        tick.written = try await writer.writeDue(at: configuration.now())
        if !tick.written.isEmpty { logger.info("time rows written to the change feed", metadata: ["rows": "\(tick.written.count)"]) }
        tick.answers = try await ConsumptionResponder.answerDue(consumption, clock: configuration.now, database: writer.database)
        if !tick.answers.accepted.isEmpty {
            logger.info("consumption requests answered by the policy (automatic)", metadata: ["requests": "\(tick.answers.accepted.count)"])
        }
        if let ending = tick.answers.ending { logger.warning("automatic consumption answers: \(ending.description)") }
        return tick
    }

    package func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    _ = try await tick()
                } catch is CancellationError {
                    break
                } catch {
                    // The database or Apple may be away: the next tick tries again; the unique key
                    // keeps rows single and an answer written `sending` is never sent twice.
                    logger.warning("the leader's tick failed", metadata: ["error": "\(error)"])
                }
                do { try await configuration.clock.sleep(for: configuration.interval) } catch { break }
            }
        }
        try? await RunLedger(database: writer.database).releaseServeLease(Self.leaseName, holder: configuration.holder)
    }
}
