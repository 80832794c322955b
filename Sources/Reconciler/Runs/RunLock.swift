import Foundation
import Logging
import PostgresNIO

/// One reconcile run at a time per app and environment: a PostgreSQL session advisory lock held
/// on a dedicated connection for the whole run. A crashed or killed process loses its
/// connection, so the lock is never left behind.
public struct RunLock: Sendable {
    public let client: PostgresClient
    public let logger: Logger

    public init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// Another run holds the lock.
    public struct Busy: Error, CustomStringConvertible, Sendable {
        public var holder: RunRecord?
        public var description: String {
            guard let holder else {
                return "another reconcile run holds the lock for this app and environment; try again later or pass --wait"
            }
            return "run \(holder.runId) holds the lock (window \(holder.windowStart)–\(holder.windowEnd), started \(holder.startedAt), by \(holder.holder ?? "unknown")); try again later or pass --wait"
        }
    }


    /// Runs `body` holding the lock. Without `wait`, throws ``Busy`` when another run holds it.
    public func withLock<Result: Sendable>(
        environment: String, bundleId: String, wait: Bool, onWait: @Sendable () -> Void = {},
        _ body: () async throws -> Result
    ) async throws -> Result {
        let name = environment + "/" + bundleId
        return try await client.withConnection { connection in
            var acquired = false
            let rows = try await connection.query("SELECT pg_try_advisory_lock(727003, hashtext(\(name)))", logger: logger)
            for try await value in rows.decode(Bool.self) { acquired = value }
            if !acquired {
                guard wait else {
                    throw Busy(holder: try? await RunLedger(client: client, logger: logger).runningRun(environment: environment, bundleId: bundleId))
                }
                onWait()
                // Poll rather than block in pg_advisory_lock, so Ctrl-C stops the wait at once.
                while !acquired {
                    try await Task.sleep(for: .seconds(1))
                    let retry = try await connection.query("SELECT pg_try_advisory_lock(727003, hashtext(\(name)))", logger: logger)
                    for try await value in retry.decode(Bool.self) { acquired = value }
                }
            }
            do {
                let result = try await body()
                _ = try? await connection.query("SELECT pg_advisory_unlock(727003, hashtext(\(name)))", logger: logger)
                return result
            } catch {
                _ = try? await connection.query("SELECT pg_advisory_unlock(727003, hashtext(\(name)))", logger: logger)
                throw error
            }
        }
    }
}
