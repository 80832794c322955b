import Foundation
import Logging
import PostgresNIO

/// Runs work in PostgreSQL transactions on a `PostgresClient`.
public struct Database: Sendable {
    public let client: PostgresClient
    public let logger: Logger

    public init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// Runs `body` in one transaction on one connection: committed when it returns, rolled back
    /// when it throws, or when `rollback` is true (dry runs see exactly what would happen).
    /// A deadlock or serialization failure reruns the whole body, a few times.
    public func transaction<Result: Sendable>(
        rollback: Bool = false, _ body: (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        var attempt = 0
        while true {
            attempt += 1
            do {
                return try await client.withConnection { connection in
                    try await connection.query("BEGIN", logger: logger)
                    do {
                        let result = try await body(connection)
                        try await connection.query(rollback ? "ROLLBACK" : "COMMIT", logger: logger)
                        return result
                    } catch {
                        _ = try? await connection.query("ROLLBACK", logger: logger)
                        throw error
                    }
                }
            } catch let error as PSQLError where attempt < 5 && Self.isTransient(error) {
                logger.debug("retrying transaction", metadata: ["sqlState": "\(error.serverInfo?[.sqlState] ?? "")"])
                continue
            }
        }
    }

    static func isTransient(_ error: PSQLError) -> Bool {
        // 40001 serialization_failure, 40P01 deadlock_detected.
        guard let state = error.serverInfo?[.sqlState] else { return false }
        return state == "40001" || state == "40P01"
    }
}

extension PSQLError {
    /// The server's message, or the error's kind, without the query text or bind values.
    public var briefDescription: String {
        if let message = serverInfo?[.message] {
            return "\(message) (SQLSTATE \(serverInfo?[.sqlState] ?? "?"))"
        }
        return "\(code)"
    }
}
