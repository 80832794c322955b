import Foundation
import Logging
package import PostgresNIO

/// The PostgreSQL connection settings, from a `postgres://` URL such as `DATABASE_URL`.
///
/// ```swift
/// let settings = try DatabaseSettings(url: "postgres://reconciler:secret@db:5432/iap?sslmode=verify-full&sslrootcert=/etc/ssl/db-ca.pem")
/// let client = PostgresClient(configuration: settings.clientConfiguration, backgroundLogger: logger)
/// ```
///
/// The URL follows libpq: `postgres[ql]://[user[:password]@][host][:port][/database][?param=value&...]`, with
/// special characters percent-encoded (`@ : / ? # %` and spaces in a password as `%40 %3A %2F %3F %23 %25 %20`).
/// Parameters: `sslmode`, `sslrootcert`, `sslcert`, `sslkey`, `host` (a directory selects a Unix socket),
/// `hostaddr` (connect to this address, verify the certificate against `host`), `port`, `user`, `password`,
/// `dbname`; others are ignored. A URL that could be read more than one way (a second `@`, an `@` after the
/// first `/`, a `#`, a space, a bad `%` escape) is refused rather than guessed.
///
/// TLS (`sslmode`, as libpq):
/// - `disable`, `allow`: no TLS.
/// - `prefer` (the default): TLS when the server offers it, plain otherwise.
/// - `require`: TLS; the certificate is not checked, unless `sslrootcert` is given: then as `verify-ca`.
/// - `verify-ca`: TLS; the certificate must chain to a CA in `sslrootcert` (no host name check).
/// - `verify-full`: as `verify-ca`, and the certificate must name the host (`host`, or the URL's host).
///
/// Without `sslrootcert`, `verify-ca` and `verify-full` trust the system's CA store (libpq would instead
/// require `~/.postgresql/root.crt`); `sslrootcert=system` says so explicitly and, as in libpq, implies
/// `verify-full`. `sslcert` and `sslkey` (PEM files, key unencrypted) present a client certificate.
/// The files are read when the settings are made, so a missing or unreadable file is an ``InvalidURL``.
package struct DatabaseSettings: Sendable, CustomStringConvertible {
    package var host: String
    package var port: Int
    var username: String
    package var password: String?
    package var database: String
    var sslMode: SSLMode
    var unixSocketPath: String?
    package var maximumConnections: Int
    /// libpq's `hostaddr`: the address to connect to, while `host` names the server for TLS verification.
    var hostAddress: String?
    /// libpq's `sslrootcert`: a PEM file of the CAs to trust, or `system`.
    package private(set) var sslRootCertificate: String?
    /// libpq's `sslcert` and `sslkey`: the client certificate chain and its key (PEM files).
    package private(set) var sslCertificate: String?
    package private(set) var sslKey: String?

    private var trustedRoots: NIOSSLTrustRoots?
    private var clientCertificateChain: [NIOSSLCertificate] = []
    private var clientPrivateKey: NIOSSLPrivateKey?

    /// A `DATABASE_URL` that cannot be used. Its description names the problem and shows the URL only
    /// through ``DatabaseSettings/redacted(_:)``.
    package struct InvalidURL: Error, CustomStringConvertible, CustomDebugStringConvertible, Sendable {
        package struct Code: Hashable, Sendable, CustomStringConvertible {
            package let description: String
            /// Not a `postgres://` URL, or one that can be read more than one way.
            package static let malformed = Code(description: "malformed")
            /// An `sslmode` libpq does not know, or one that contradicts `sslrootcert=system`.
            static let invalidSSLMode = Code(description: "invalidSSLMode")
            /// `sslrootcert`, `sslcert` or `sslkey` cannot be read or holds no usable PEM data.
            static let unreadableTLSFile = Code(description: "unreadableTLSFile")
        }

        package var code: Code
        package var description: String
        package var debugDescription: String { "InvalidURL(\(code)): \(description)" }

        package init(code: Code = .malformed, description: String) {
            self.code = code
            self.description = description
        }
    }

    /// libpq's `sslmode`, with libpq's names as raw values.
    enum SSLMode: String, CaseIterable, Sendable, CustomStringConvertible {
        case disable, allow, prefer, require
        case verifyCA = "verify-ca"
        case verifyFull = "verify-full"

        var description: String { rawValue }
        /// Whether the connection is encrypted at all (libpq's `allow` tries without TLS first, and
        /// PostgresNIO has no such mode: it connects without).
        var usesTLS: Bool { self != .disable && self != .allow }
    }

    package init(url: String, maximumConnections: Int = 20) throws {
        let parts = try URLParts(url)
        var query: [String: String] = [:]
        for (name, value) in parts.query { query[name] = value }

        self.username = query["user"] ?? parts.user.flatMap { $0.isEmpty ? nil : $0 } ?? "postgres"
        self.password = query["password"] ?? parts.password
        if let port = query["port"] ?? parts.port {
            guard let number = Int(port), (1...65535).contains(number) else {
                throw InvalidURL(description: "DATABASE_URL has an invalid port (got \(Self.redacted(url)))")
            }
            self.port = number
        } else {
            self.port = 5432
        }
        self.database = query["dbname"] ?? parts.database.flatMap { $0.isEmpty ? nil : $0 } ?? username
        let host = query["host"] ?? parts.host
        if let host, host.hasPrefix("/") {
            self.host = host
            self.unixSocketPath = "\(host)/.s.PGSQL.\(port)"
        } else {
            self.host = host.flatMap { $0.isEmpty ? nil : $0 } ?? "localhost"
            self.unixSocketPath = nil
            guard Self.isHostName(self.host) else {
                throw InvalidURL(description: "DATABASE_URL has an invalid host (got \(Self.redacted(url)))")
            }
        }
        self.hostAddress = query["hostaddr"].flatMap { $0.isEmpty ? nil : $0 }
        if let hostAddress, !Self.isHostName(hostAddress) {
            throw InvalidURL(description: "DATABASE_URL has an invalid hostaddr (got \(Self.redacted(url)))")
        }
        self.maximumConnections = maximumConnections

        self.sslRootCertificate = query["sslrootcert"].flatMap { $0.isEmpty ? nil : $0 }
        let systemRoots = sslRootCertificate == "system"
        let sslMode: SSLMode
        if let named = query["sslmode"] {
            guard let mode = SSLMode(rawValue: named) else {
                throw InvalidURL(
                    code: .invalidSSLMode,
                    description: "unknown sslmode in DATABASE_URL: use one of \(SSLMode.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            sslMode = mode
        } else {
            sslMode = systemRoots ? .verifyFull : .prefer
        }
        self.sslMode = sslMode
        if systemRoots, sslMode != .verifyFull {
            throw InvalidURL(
                code: .invalidSSLMode,
                description: "sslrootcert=system needs sslmode=verify-full (as in libpq), not \(sslMode)")
        }
        if systemRoots {
            trustedRoots = .default
        } else if let path = sslRootCertificate {
            trustedRoots = .certificates(try Self.loadCertificates(path, parameter: "sslrootcert"))
        }
        self.sslCertificate = query["sslcert"].flatMap { $0.isEmpty ? nil : $0 }
        self.sslKey = query["sslkey"].flatMap { $0.isEmpty ? nil : $0 }
        switch (sslCertificate, sslKey) {
        case (nil, nil):
            break
        case (let certificate?, let key?):
            clientCertificateChain = try Self.loadCertificates(certificate, parameter: "sslcert")
            do {
                clientPrivateKey = try NIOSSLPrivateKey(file: key, format: .pem)
            } catch {
                throw InvalidURL(
                    code: .unreadableTLSFile,
                    description: "sslkey \(key) in DATABASE_URL cannot be used: \(Self.fileProblem(key)) (an unencrypted PEM private key is needed)")
            }
            if let tls = tlsConfiguration {
                do { _ = try NIOSSLContext(configuration: tls) } catch {
                    throw InvalidURL(
                        code: .unreadableTLSFile,
                        description: "sslcert \(certificate) and sslkey \(key) in DATABASE_URL do not form a usable client certificate (\(error))")
                }
            }
        default:
            throw InvalidURL(
                code: .unreadableTLSFile, description: "DATABASE_URL gives only one of sslcert and sslkey: a client certificate needs both")
        }
    }

    /// The URL with its password replaced, safe for logs.
    package var description: String {
        let address = unixSocketPath ?? "\(host.contains(":") ? "[\(host)]" : host):\(port)"
        // A user name with unusual characters may be a password typed in the wrong place: not shown.
        let user = Self.isPlain(Substring(username), extra: "@+") ? username : "(user)"
        return "postgres://\(user)\(password == nil ? "" : ":***")@\(address)/\(database)"
    }

    /// The TLS settings `sslmode`, `sslrootcert`, `sslcert` and `sslkey` ask for, or nil without TLS.
    var tlsConfiguration: TLSConfiguration? {
        guard sslMode.usesTLS, unixSocketPath == nil else { return nil }
        var tls = TLSConfiguration.makeClientConfiguration()
        if let trustedRoots { tls.trustRoots = trustedRoots }
        switch sslMode {
        case .verifyFull:
            tls.certificateVerification = .fullVerification
        case .verifyCA:
            tls.certificateVerification = .noHostnameVerification
        default:
            // libpq: with a root certificate, `prefer` and `require` check the chain (not the name).
            tls.certificateVerification = trustedRoots == nil ? .none : .noHostnameVerification
        }
        if !clientCertificateChain.isEmpty, let clientPrivateKey {
            tls.certificateChain = clientCertificateChain.map { .certificate($0) }
            tls.privateKey = .privateKey(clientPrivateKey)
        }
        return tls
    }

    package var clientConfiguration: PostgresClient.Configuration {
        var configuration: PostgresClient.Configuration
        if let unixSocketPath {
            configuration = .init(unixSocketPath: unixSocketPath, username: username, password: password, database: database)
        } else {
            let mode: PostgresClient.Configuration.TLS
            if let tls = tlsConfiguration {
                mode = sslMode == .prefer ? .prefer(tls) : .require(tls)
            } else {
                mode = .disable
            }
            configuration = .init(host: hostAddress ?? host, port: port, username: username, password: password, database: database, tls: mode)
            // With hostaddr, the certificate must still name `host` (an IP is matched against the address instead).
            if hostAddress != nil, !Self.isIPAddress(host) { configuration.options.tlsServerName = host }
        }
        configuration.options.maximumConnections = maximumConnections
        return configuration
    }

    /// The same settings for one connection outside the pool: a session of its own for `LISTEN`,
    /// which a pooled connection (or PgBouncer in transaction mode) cannot hold.
    func connectionConfiguration() throws -> PostgresConnection.Configuration {
        var configuration: PostgresConnection.Configuration
        if let unixSocketPath {
            configuration = .init(unixSocketPath: unixSocketPath, username: username, password: password, database: database)
        } else {
            let mode: PostgresConnection.Configuration.TLS
            if let tls = tlsConfiguration {
                let context = try NIOSSLContext(configuration: tls)
                mode = sslMode == .prefer ? .prefer(context) : .require(context)
            } else {
                mode = .disable
            }
            configuration = .init(host: hostAddress ?? host, port: port, username: username, password: password, database: database, tls: mode)
            if hostAddress != nil, !Self.isIPAddress(host) { configuration.options.tlsServerName = host }
        }
        return configuration
    }

    private static func isHostName(_ host: String) -> Bool {
        !host.isEmpty
            && host.unicodeScalars.allSatisfy { $0.isASCII && (CharacterSet.alphanumerics.contains($0) || ".-_:".unicodeScalars.contains($0)) }
    }

    private static func isIPAddress(_ host: String) -> Bool {
        var ipv4 = in_addr(), ipv6 = in6_addr()
        return inet_pton(AF_INET, host, &ipv4) == 1 || inet_pton(AF_INET6, host, &ipv6) == 1
    }

    private static func loadCertificates(_ path: String, parameter: String) throws -> [NIOSSLCertificate] {
        let certificates: [NIOSSLCertificate]
        do {
            certificates = try NIOSSLCertificate.fromPEMFile(path)
        } catch {
            throw InvalidURL(code: .unreadableTLSFile, description: "\(parameter) \(path) in DATABASE_URL cannot be used: \(fileProblem(path))")
        }
        guard !certificates.isEmpty else {
            throw InvalidURL(code: .unreadableTLSFile, description: "\(parameter) \(path) in DATABASE_URL holds no PEM certificate")
        }
        return certificates
    }

    private static func fileProblem(_ path: String) -> String {
        if !FileManager.default.fileExists(atPath: path) { return "no such file" }
        if !FileManager.default.isReadableFile(atPath: path) { return "not readable by this user" }
        return "not valid PEM"
    }
}

// MARK: - Parsing

extension DatabaseSettings {
    /// The pieces of a `postgres://` URL, percent-decoded, read strictly: anything that libpq and a
    /// reader could split differently is an error (whose message shows only the redacted URL).
    struct URLParts {
        var user: String?
        var password: String?
        var host: String?
        var port: String?
        var database: String?
        var query: [(String, String)] = []

        init(_ url: String) throws {
            func invalid(_ problem: String) -> InvalidURL {
                InvalidURL(description: "DATABASE_URL \(problem) (got \(DatabaseSettings.redacted(url)))")
            }
            let encodeHint = "percent-encode @ : / ? # % and spaces in the password as %40 %3A %2F %3F %23 %25 %20"
            guard let separator = url.range(of: "://") else {
                throw invalid("must look like postgres://user:password@host:5432/database")
            }
            guard ["postgres", "postgresql"].contains(url[..<separator.lowerBound].lowercased()) else {
                throw invalid("must be a postgres:// URL")
            }
            guard !url.unicodeScalars.contains(where: { $0 == "#" || $0.properties.isWhitespace || $0.value < 0x20 || $0.value == 0x7F }) else {
                throw invalid("holds a '#', a space or a control character: \(encodeHint)")
            }
            var rest = url[separator.upperBound...]
            let ats = rest.indices.filter { rest[$0] == "@" }
            if let at = ats.first {
                // libpq reads the user information up to the first '@' before any '/': a second '@', or one
                // after a '/', means a password with an unencoded '@' or '/', which would be cut in two.
                guard ats.count == 1, !rest[..<at].contains("/") else { throw invalid("is ambiguous: \(encodeHint)") }
                let userInfo = rest[..<at]
                if let colon = userInfo.firstIndex(of: ":") {
                    user = try Self.decode(userInfo[..<colon], or: invalid("has an invalid % escape in the user name: \(encodeHint)"))
                    password = try Self.decode(
                        userInfo[userInfo.index(after: colon)...],
                        or: invalid("has an invalid % escape in the password: \(encodeHint)"))
                } else {
                    user = try Self.decode(userInfo, or: invalid("has an invalid % escape in the user name: \(encodeHint)"))
                }
                rest = rest[rest.index(after: at)...]
            }
            var queryText: Substring = ""
            if let mark = rest.firstIndex(of: "?") {
                queryText = rest[rest.index(after: mark)...]
                rest = rest[..<mark]
            }
            var authority = rest
            if let slash = rest.firstIndex(of: "/") {
                authority = rest[..<slash]
                database = try Self.decode(rest[rest.index(after: slash)...], or: invalid("has an invalid % escape in the database name"))
            }
            if authority.hasPrefix("[") {
                guard let close = authority.firstIndex(of: "]") else { throw invalid("has an unclosed [ in the host") }
                host = String(authority[authority.index(after: authority.startIndex)..<close])
                authority = authority[authority.index(after: close)...]
                guard authority.isEmpty || authority.hasPrefix(":") else { throw invalid("has an invalid host") }
                if !authority.isEmpty { port = String(authority.dropFirst()) }
            } else if let colon = authority.firstIndex(of: ":") {
                host = try Self.decode(authority[..<colon], or: invalid("has an invalid host"))
                port = String(authority[authority.index(after: colon)...])
            } else if !authority.isEmpty {
                host = try Self.decode(authority, or: invalid("has an invalid host"))
            }
            if let port, port.isEmpty { self.port = nil }
            for item in queryText.split(separator: "&", omittingEmptySubsequences: true) {
                guard let equals = item.firstIndex(of: "=") else { throw invalid("has a query parameter without '='") }
                let name = try Self.decode(item[..<equals], or: invalid("has an invalid % escape in a query parameter"))
                let value = try Self.decode(item[item.index(after: equals)...], or: invalid("has an invalid % escape in a query parameter"))
                query.append((name, value))
            }
        }

        /// Percent-decoding that refuses malformed escapes instead of passing them through.
        static func decode(_ text: Substring, or error: @autoclosure () -> InvalidURL) throws -> String {
            var bytes: [UInt8] = []
            var iterator = Array(text.utf8).makeIterator()
            while let byte = iterator.next() {
                guard byte == UInt8(ascii: "%") else {
                    bytes.append(byte)
                    continue
                }
                guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else { throw error() }
                bytes.append(high << 4 | low)
            }
            guard let decoded = String(validating: bytes, as: UTF8.self) else { throw error() }
            return decoded
        }

        private static func hexValue(_ byte: UInt8) -> UInt8? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
            default: nil
            }
        }
    }
}

// MARK: - Redaction

extension DatabaseSettings {
    /// Connection parameters whose values are never secret, shown in redacted URLs when their values are plain.
    private static let plainParameters: Set<String> = [
        "host", "hostaddr", "port", "dbname", "user", "sslmode", "sslrootcert", "sslcert", "sslkey", "application_name",
        "connect_timeout", "target_session_attrs",
    ]

    /// A connection string safe to print, whatever it looks like: a URL keeps its scheme, a plain user name,
    /// host, port, database and the plain values of known non-secret parameters; everything else (a password,
    /// `password=`, fragments, anything unusual) becomes `***` or is left out. Keyword/value strings
    /// (`host=db password=...`) keep their known non-secret keywords. Anything else prints as a placeholder.
    ///
    /// ```swift
    /// DatabaseSettings.redacted("postgres://alice:s3cr%t#x@db:5432/iap")  // "postgres://alice:***@db:5432/iap"
    /// ```
    package static func redacted(_ text: String) -> String {
        let text = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if let separator = text.range(of: "://") {
            return redactedURL(scheme: text[..<separator.lowerBound], rest: text[separator.upperBound...])
        }
        if text.contains("=") {
            return redactedKeywords(text)
        }
        return "(not a URL)"
    }

    private static func isPlain(_ text: Substring, extra: String = "") -> Bool {
        text.unicodeScalars.allSatisfy {
            $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "._-".unicodeScalars.contains($0) || extra.unicodeScalars.contains($0))
        }
    }

    private static func redactedURL(scheme: Substring, rest: Substring) -> String {
        var result = isPlain(scheme, extra: "+") && !scheme.isEmpty ? "\(scheme)://" : "(scheme)://"
        var rest = rest
        // Everything before the last '@' may hold a password with any characters in it, '@' included.
        if let at = rest.lastIndex(of: "@") {
            let userInfo = rest[..<at]
            // A '?' and then '=' before it: the '@' may sit inside a query value such as `password=`, and what
            // follows may be the rest of that value. Nothing after the scheme can be shown safely.
            if let mark = userInfo.firstIndex(of: "?"), userInfo[mark...].contains("=") { return result + "***@…" }
            let user = userInfo.prefix { $0 != ":" }
            result += (isPlain(user) ? String(user) : "***") + (user.count < userInfo.count ? ":***" : "") + "@"
            rest = rest[rest.index(after: at)...]
        }
        if let hash = rest.firstIndex(of: "#") { rest = rest[..<hash] }
        var query: Substring = ""
        if let mark = rest.firstIndex(of: "?") {
            query = rest[rest.index(after: mark)...]
            rest = rest[..<mark]
        }
        let authority = rest.prefix { $0 != "/" }
        result += isPlain(authority, extra: ":[]%") ? String(authority) : "…"
        if authority.count < rest.count {
            let path = rest.dropFirst(authority.count + 1)
            result += "/" + (isPlain(path, extra: "%$") ? String(path) : "…")
        }
        let shown = query.split(separator: "&").compactMap { item -> String? in
            let parts = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2, plainParameters.contains(String(parts[0])) else { return nil }
            return "\(parts[0])=\(isPlain(parts[1], extra: "/~+") ? String(parts[1]) : "…")"
        }
        if !shown.isEmpty { result += "?" + shown.joined(separator: "&") }
        return result
    }

    /// libpq's keyword/value form: `keyword = value` pairs, values bare or in single quotes with backslash escapes.
    private static func redactedKeywords(_ text: String) -> String {
        var shown: [String] = []
        var characters = Substring(text)
        func skipSpaces() { characters = characters.drop { $0.isWhitespace } }
        while true {
            skipSpaces()
            guard !characters.isEmpty else { break }
            let keyword = characters.prefix { $0 != "=" && !$0.isWhitespace }
            characters = characters.dropFirst(keyword.count)
            skipSpaces()
            guard characters.first == "=" else {
                shown.append("…")
                break
            }
            characters = characters.dropFirst()
            skipSpaces()
            var value = ""
            var terminated = true
            if characters.first == "'" {
                characters = characters.dropFirst()
                terminated = false
                while let character = characters.first {
                    characters = characters.dropFirst()
                    if character == "\\", let next = characters.first {
                        value.append(next)
                        characters = characters.dropFirst()
                    } else if character == "'" {
                        terminated = true
                        break
                    } else {
                        value.append(character)
                    }
                }
            } else {
                while let character = characters.first, !character.isWhitespace {
                    characters = characters.dropFirst()
                    if character == "\\", let next = characters.first {
                        value.append(next)
                        characters = characters.dropFirst()
                    } else {
                        value.append(character)
                    }
                }
            }
            if plainParameters.contains(String(keyword)) && terminated {
                shown.append("\(keyword)=\(isPlain(Substring(value), extra: "/~+") ? value : "…")")
            } else if isPlain(keyword) && !keyword.isEmpty {
                shown.append("\(keyword)=***")
            } else {
                shown.append("…")
            }
            guard terminated else { break }
        }
        return shown.isEmpty ? "(not a URL)" : shown.joined(separator: " ")
    }

    /// Every string in `text` that may be a password (raw and percent-decoded), for scrubbing output as a last
    /// line of defence. Only strings of 4 or more characters are returned: shorter ones would blank out
    /// ordinary words, and are no secret anyway.
    static func possibleSecrets(in text: String) -> [String] {
        var secrets: [String] = []
        func add<S: StringProtocol>(_ candidate: S) {
            secrets.append(String(candidate))
            if let decoded = String(candidate).removingPercentEncoding { secrets.append(decoded) }
        }
        if let separator = text.range(of: "://") {
            let rest = text[separator.upperBound...]
            if let at = rest.lastIndex(of: "@"), let colon = rest[..<at].firstIndex(of: ":") {
                // Both the longest reading (up to the last '@') and the libpq reading (up to the first '@').
                add(rest[rest.index(after: colon)..<at])
                if let first = rest.firstIndex(of: "@"), first > colon { add(rest[rest.index(after: colon)..<first]) }
            }
        }
        for separator in ["password=", "sslpassword="] {
            var searchRange = text.startIndex..<text.endIndex
            while let found = text.range(of: separator, options: .caseInsensitive, range: searchRange) {
                let value = text[found.upperBound...].prefix { !"& \t\n#".contains($0) }
                add(value.hasPrefix("'") ? value.dropFirst().prefix { $0 != "'" } : value)
                searchRange = found.upperBound..<text.endIndex
            }
        }
        return Array(Set(secrets.filter { $0.count >= 4 })).sorted { $0.count > $1.count }
    }

    /// `text` with every possible secret of each connection string replaced by `***`.
    package static func scrubbing(_ text: String, secretsOf connectionStrings: [String]) -> String {
        var text = text
        for secret in connectionStrings.flatMap(possibleSecrets(in:)) {
            text = text.replacingOccurrences(of: secret, with: "***")
        }
        return text
    }
}
