import Foundation
import Logging
import PostgresNIO

/// The PostgreSQL connection settings, from a `postgres://` URL such as `DATABASE_URL`.
///
/// ```swift
/// let settings = try DatabaseSettings(url: "postgres://reconciler:secret@db:5432/iap?sslmode=require")
/// let client = PostgresClient(configuration: settings.clientConfiguration, backgroundLogger: logger)
/// ```
///
/// `sslmode` follows libpq: `disable`, `prefer` (the default; no certificate check), `require`
/// (no certificate check), `verify-ca` and `verify-full`. A `host` query parameter that is a
/// directory selects a Unix socket.
public struct DatabaseSettings: Sendable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public var username: String
    public var password: String?
    public var database: String
    public var sslMode: String
    public var unixSocketPath: String?
    public var maximumConnections: Int

    public struct InvalidURL: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    public init(url: String, maximumConnections: Int = 20) throws {
        guard let components = URLComponents(string: url),
              let scheme = components.scheme, ["postgres", "postgresql"].contains(scheme)
        else {
            throw InvalidURL(description: "DATABASE_URL must look like postgres://user:password@host:5432/database (got \(Self.redacted(url)))")
        }
        let query = Dictionary((components.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { $1 })
        self.username = components.percentEncodedUser?.removingPercentEncoding ?? "postgres"
        self.password = components.percentEncodedPassword?.removingPercentEncoding
        self.port = components.port ?? Int(query["port"] ?? "") ?? 5432
        self.database = String(components.path.dropFirst()).removingPercentEncoding.flatMap { $0.isEmpty ? nil : $0 } ?? username
        self.sslMode = query["sslmode"] ?? "prefer"
        guard ["disable", "allow", "prefer", "require", "verify-ca", "verify-full"].contains(sslMode) else {
            throw InvalidURL(description: "unknown sslmode \(sslMode) in DATABASE_URL")
        }
        if let socketDirectory = query["host"], socketDirectory.hasPrefix("/") {
            self.host = socketDirectory
            self.unixSocketPath = "\(socketDirectory)/.s.PGSQL.\(port)"
        } else {
            self.host = components.host.flatMap { $0.isEmpty ? nil : $0 } ?? "localhost"
            self.unixSocketPath = nil
        }
        self.maximumConnections = maximumConnections
    }

    /// The URL with its password replaced, safe for logs.
    public var description: String {
        "postgres://\(username)\(password == nil ? "" : ":***")@\(unixSocketPath ?? "\(host):\(port)")/\(database)"
    }

    /// A URL with any password removed, for error messages.
    public static func redacted(_ url: String) -> String {
        guard var components = URLComponents(string: url), components.password != nil else { return url }
        components.password = "***"
        return components.string ?? "(unparseable URL)"
    }

    public var clientConfiguration: PostgresClient.Configuration {
        var configuration: PostgresClient.Configuration
        if let unixSocketPath {
            configuration = .init(unixSocketPath: unixSocketPath, username: username, password: password, database: database)
        } else {
            var tls = TLSConfiguration.makeClientConfiguration()
            let mode: PostgresClient.Configuration.TLS
            switch sslMode {
            case "disable", "allow":
                mode = .disable
            case "verify-ca", "verify-full":
                if sslMode == "verify-ca" { tls.certificateVerification = .noHostnameVerification }
                mode = .require(tls)
            case "require":
                tls.certificateVerification = .none
                mode = .require(tls)
            default:
                tls.certificateVerification = .none
                mode = .prefer(tls)
            }
            configuration = .init(host: host, port: port, username: username, password: password, database: database, tls: mode)
        }
        configuration.options.maximumConnections = maximumConnections
        return configuration
    }
}

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
