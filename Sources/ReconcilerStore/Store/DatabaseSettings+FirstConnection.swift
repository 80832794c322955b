import Foundation
package import Logging
import PostgresNIO
import ReconcilerDomain

extension DatabaseSettings {
    /// Opens one connection and closes it before a command hands the database to its pool, so that a
    /// database the command cannot use ends it within `timeout`, in one line that names the database
    /// (host and port, never the password) and the cause, instead of a pool that retries for a minute
    /// and logs every attempt. While the server is only away (the connection refused or not answered,
    /// a server starting up or full: a restart, a failover) it tries again until `timeout` has passed;
    /// what no retry fixes (a host name that does not resolve, a login or TLS refused) ends it at once.
    ///
    /// ```swift
    /// try await settings.checkConnection(within: .seconds(10), logger: clientLogger)
    /// ```
    ///
    /// - Parameter logger: gets each failed attempt with the client's own error, at `info`.
    /// - Throws: a ``ReconcilerError``: ``ReconcilerError/Code/invalidDatabaseURL`` when the host name
    ///   does not resolve; ``ReconcilerError/Code/databaseRefused`` when the server refuses the login
    ///   (authentication, pg_hba.conf, no such database) or TLS fails; ``ReconcilerError/Code/databaseUnavailable``
    ///   when the connection was still refused, unanswered or not ready when `timeout` had passed.
    package func checkConnection(within timeout: Duration, logger: Logger) async throws {
        var configuration: PostgresConnection.Configuration
        do {
            configuration = try connectionConfiguration()
        } catch {
            throw ReconcilerError(.databaseRefused, "database \(self): cannot set up TLS (\(scrubbed("\(error)")))")
        }
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        var attempt = 0
        // The cause reported: an attempt cut short by the deadline says less than one refused before it.
        var reported: ConnectionProblem?
        while true {
            attempt += 1
            // An attempt ends by the deadline, its TLS and login included (PostgresNIO's connect timeout covers the startup).
            configuration.options.connectTimeout = .nanoseconds(max(Self.nanoseconds(deadline - clock.now), 1_000_000))
            do {
                let connection = try await PostgresConnection.connect(configuration: configuration, id: attempt, logger: logger)
                try? await connection.close()
                return
            } catch {
                try Task.checkCancellation()
                let problem = self.problem(error)
                logger.info(
                    "connecting to the database failed",
                    metadata: ["database": "\(self)", "attempt": "\(attempt)", "error": "\(scrubbed(String(reflecting: error)))"])
                guard problem.code == .databaseUnavailable else {
                    throw ReconcilerError(problem.code, "database \(self): \(problem.cause)")
                }
                if !problem.timedOut || reported == nil { reported = problem }
            }
            guard clock.now < deadline else {
                let cause = reported?.cause ?? "no answer"
                throw ReconcilerError(.databaseUnavailable, "database \(self): \(cause) (tried for \(timeout.components.seconds) s)")
            }
            let pause = min(Duration.milliseconds(100 * (1 << min(attempt, 4))), .seconds(1))
            try await Task.sleep(for: min(pause, deadline - clock.now))
        }
    }

    /// Why one attempt failed, in an operator's words, and whether a retry may help (``ReconcilerError/Code/databaseUnavailable``).
    private struct ConnectionProblem {
        var code: ReconcilerError.Code
        var cause: String
        var timedOut = false

        init(_ code: ReconcilerError.Code, _ cause: String, timedOut: Bool = false) {
            self.code = code
            self.cause = cause
            self.timedOut = timedOut
        }
    }

    /// Where the connection goes: the socket, or the host (and `hostaddr`) and port.
    private var address: String {
        if let unixSocketPath { return unixSocketPath }
        let target = hostAddress.map { "\(host) (hostaddr \($0))" } ?? host
        return "\(target.contains(":") ? "[\(target)]" : target):\(port)"
    }

    private func problem(_ error: any Error) -> ConnectionProblem {
        switch error {
        case let error as PSQLError:
            if error.code == .sslUnsupported {
                return ConnectionProblem(.databaseRefused, "the server does not offer TLS, which \(tlsContext) requires")
            }
            if let state = error.serverInfo?[.sqlState] {
                return serverProblem(state: state, message: scrubbed(error.serverInfo?[.message] ?? ""))
            }
            if let underlying = error.underlying { return problem(underlying) }
            return ConnectionProblem(.databaseUnavailable, "\(address) closed the connection before it was ready (\(error.code))")
        case let error as NIOConnectionError:
            // Every address the name resolved to was tried: a refusal among them says the most.
            let failures = error.connectionErrors.map(\.error)
            if let refused = failures.first(where: { ($0 as? IOError)?.errnoCode == ECONNREFUSED }) ?? failures.first {
                return problem(refused)
            }
            if let lookup = error.dnsAError ?? error.dnsAAAAError { return problem(lookup) }
            return ConnectionProblem(.databaseUnavailable, "cannot connect to \(address) (\(scrubbed("\(error)")))")
        case let error as SocketAddressError.UnknownHost:
            // EAI_AGAIN: the resolver did not answer, which may pass; any other answer is that no such name exists.
            if error.errorCode == Int(EAI_AGAIN) {
                return ConnectionProblem(.databaseUnavailable, "the host name \(host) could not be looked up (\(error.errorDescription))")
            }
            return ConnectionProblem(.invalidDatabaseURL, "host name not found: \(host) does not resolve (\(error.errorDescription))")
        case let error as IOError:
            switch error.errnoCode {
            case ECONNREFUSED: return ConnectionProblem(.databaseUnavailable, "connection refused by \(address)")
            case ENOENT: return ConnectionProblem(.databaseUnavailable, "no server socket at \(address)")
            default: return ConnectionProblem(.databaseUnavailable, "cannot connect to \(address): \(String(cString: strerror(error.errnoCode)))")
            }
        case ChannelError.connectTimeout:
            return ConnectionProblem(.databaseUnavailable, "timed out: \(address) did not answer", timedOut: true)
        case let error where Self.isTLSError(error):
            return ConnectionProblem(.databaseRefused, tlsProblem(error))
        default:
            return ConnectionProblem(.databaseUnavailable, "cannot connect to \(address) (\(scrubbed("\(error)")))")
        }
    }

    /// The server's answer to the login: refused for good (authentication, pg_hba.conf, no such
    /// database, anything unexpected), or not now (starting up, shutting down, too many connections).
    private func serverProblem(state: String, message: String) -> ConnectionProblem {
        // 08: connection exception; 57P01-57P03: shutdown, crash, starting up; 53300: too many connections.
        if state.hasPrefix("08") || ["57P01", "57P02", "57P03", "53300"].contains(state) {
            return ConnectionProblem(.databaseUnavailable, "\(address) does not accept connections now: \(message) (SQLSTATE \(state))")
        }
        // 28: invalid authorization (password, pg_hba.conf); 3D000: no such database.
        let what = state.hasPrefix("28") ? "the login" : "the connection"
        return ConnectionProblem(.databaseRefused, "the server at \(address) refused \(what): \(message) (SQLSTATE \(state))")
    }

    private var tlsContext: String { "sslmode=\(sslMode)" + (sslRootCertificate.map { ", sslrootcert=\($0)" } ?? "") }

    private func tlsProblem(_ error: any Error) -> String {
        let detail = scrubbed(String(describing: error))
        if let extra = error as? NIOSSLExtraError, extra == .failedToValidateHostname {
            return "the server's certificate does not name \(host) (verify-full checks the host name, verify-ca only the CA) (\(tlsContext))"
        }
        if detail.contains("CERTIFICATE_VERIFY_FAILED") {
            let trusted = sslRootCertificate == nil || sslRootCertificate == "system" ? "the system trust store" : "sslrootcert"
            return "the server's certificate is not signed by a CA in \(trusted) (\(tlsContext))"
        }
        return "the TLS handshake with \(address) failed: \(detail) (\(tlsContext))"
    }

    private static func isTLSError(_ error: any Error) -> Bool {
        error is NIOSSLError || error is NIOSSLExtraError || error is BoringSSLError
    }

    private static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }

    /// `text` without this password, should a message ever carry it.
    private func scrubbed(_ text: String) -> String {
        guard let password, !password.isEmpty else { return text }
        return text.replacingOccurrences(of: password, with: "***")
    }
}
