package import AppStoreServer
import Foundation
package import Logging
package import ReconcilerDomain
package import ReconcilerShared
package import ReconcilerStore
package import ServiceLifecycle

/// The one replica of `serve` that does what no two may do at once: every tick it takes or
/// renews the lease row `leader` (``RunLedger/holdServeLease(_:holder:duration:)``) and, while it
/// holds it, writes the `time` rows that fell due (``TimeRowWriter``). A replica that stops
/// renewing (killed, cut off) loses the lease after ``Configuration/leaseDuration`` and another
/// takes over at its next tick. The automatic consumption answers are to join this tick.
///
/// ```swift
/// let leader = ServeLeader(configuration: .init(), writer: TimeRowWriter(scopes: scopes, database: database), logger: logger)
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
        /// The moment rows fall due by (the wall clock; tests move their own).
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

    /// The lease's name in `serve_leases`.
    package static let leaseName = "leader"

    package let configuration: Configuration
    package let writer: TimeRowWriter
    package let logger: Logger

    package init(configuration: Configuration, writer: TimeRowWriter, logger: Logger) {
        self.configuration = configuration
        self.writer = writer
        self.logger = logger
    }

    /// One tick: whether this replica leads, and the rows it wrote (none when it does not).
    package func tick() async throws -> (leads: Bool, written: [PurchaseChange]) {
        let ledger = RunLedger(database: writer.database)
        guard try await ledger.holdServeLease(Self.leaseName, holder: configuration.holder, duration: configuration.leaseDuration) else {
            return (false, [])
        }
        let written = try await writer.writeDue(at: configuration.now())
        if !written.isEmpty { logger.info("time rows written to the change feed", metadata: ["rows": "\(written.count)"]) }
        return (true, written)
    }

    package func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    _ = try await tick()
                } catch is CancellationError {
                    break
                } catch {
                    // The database may be away: the next tick tries again, the unique key keeps rows single.
                    logger.warning("the leader's tick failed", metadata: ["error": "\(error)"])
                }
                do { try await configuration.clock.sleep(for: configuration.interval) } catch { break }
            }
        }
        try? await RunLedger(database: writer.database).releaseServeLease(Self.leaseName, holder: configuration.holder)
    }
}
