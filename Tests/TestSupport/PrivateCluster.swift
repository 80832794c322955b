import Foundation
import Testing

/// A throwaway PostgreSQL cluster of a test's own (initdb + pg_ctl), for tests that need to restart or stop
/// the server, serve TLS, or ask for passwords, none of which the shared `jobs/dev/with-postgres` cluster may do.
///
/// It listens on 127.0.0.1 (or the loopback addresses of its configuration) on a port reserved at init and
/// held while the server is down (restart, stop), and on a socket in its own temporary directory; as root it runs as the unprivileged
/// `postgres` user (PostgreSQL refuses root), like `jobs/dev/with-postgres`. The binaries come from
/// `PG_BINDIR` or the newest `/usr/lib/postgresql/*/bin`.
///
/// Its waits end on what happened, never on the clock (``hangGuard`` only ends a hang): a start or
/// restart ends when the server accepts connections, or fails as soon as the postmaster is gone; a
/// stop ends when the postmaster has exited. On a loaded machine each can take minutes.
///
/// ```swift
/// try await PrivateCluster.with { cluster in
///     let result = try await runProcess("reconciler", ["migrate"], environment: ["DATABASE_URL": cluster.url])
///     try await cluster.restart()    // fast shutdown, then waits until it accepts connections again
///     try await cluster.stop()       // immediate; start() brings it back (with crash recovery)
/// }
/// ```
package final class PrivateCluster: Sendable {
    package struct Configuration: Sendable {
        /// Serve TLS with this certificate chain and key (PEM).
        package var tls: TLS?
        /// Roles created at start that log in over TCP with a password (scram-sha-256); `postgres` is trusted.
        package var passwordUsers: [String: String] = [:]
        /// Where it listens besides its socket: loopback addresses (Linux routes all of 127.0.0.0/8 to lo).
        package var listenAddresses = ["127.0.0.1"]
        /// More postgresql.conf settings.
        package var settings: [String: String] = [:]

        package init(
            tls: TLS? = nil, passwordUsers: [String: String] = [:], listenAddresses: [String] = ["127.0.0.1"], settings: [String: String] = [:]
        ) {
            self.tls = tls
            self.passwordUsers = passwordUsers
            self.listenAddresses = listenAddresses
            self.settings = settings
        }

        package struct TLS: Sendable {
            package var certificateChainPEM: String
            package var privateKeyPEM: String
            /// Accept TCP connections only over TLS (`hostssl` lines only in pg_hba.conf).
            package var requireTLS = true
            /// Log `postgres` in over TCP only with a client certificate (CN=postgres) signed by this CA (PEM).
            package var clientCertificateAuthorityPEM: String?

            package init(certificateChainPEM: String, privateKeyPEM: String, requireTLS: Bool = true, clientCertificateAuthorityPEM: String? = nil) {
                self.certificateChainPEM = certificateChainPEM
                self.privateKeyPEM = privateKeyPEM
                self.requireTLS = requireTLS
                self.clientCertificateAuthorityPEM = clientCertificateAuthorityPEM
            }
        }
    }

    package struct Failure: Error, CustomStringConvertible {
        package var description: String

        package init(description: String) { self.description = description }
    }

    package let configuration: Configuration
    package let directory: String
    package var port: Int { portReservation.port }
    /// Holds the port while the server is down, so that no other test (of this process or another)
    /// takes it between a stop and the next start.
    private let portReservation: PortReservation
    private let binDirectory: String
    private let owner: String?

    package var dataDirectory: String { "\(directory)/data" }
    package var logFile: String { "\(directory)/server.log" }
    /// The `postgres` superuser over TCP (trusted: no password).
    package var url: String { "postgres://postgres@127.0.0.1:\(port)/postgres" }
    /// The server log so far, for failure messages.
    package var log: String { (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? "" }

    /// Runs `body` with a started cluster, then always stops and deletes it.
    package static func with<T>(_ configuration: Configuration = Configuration(), _ body: (PrivateCluster) async throws -> T) async throws -> T {
        let cluster = try await PrivateCluster(configuration: configuration)
        let result: Result<T, any Error>
        do {
            try await cluster.start()
            try await cluster.createUsers()
            result = .success(try await body(cluster))
        } catch {
            result = .failure(error)
        }
        await cluster.destroy()
        return try result.get()
    }

    /// Creates the cluster's directory and runs initdb; `start()` starts it.
    package init(configuration: Configuration = Configuration()) async throws {
        self.configuration = configuration
        binDirectory = try Self.findBinDirectory()
        portReservation = try PortReservation()
        directory = try TemporaryDirectory.create("reconciler-private-pg", permissions: 0o755).path
        owner = getuid() == 0 ? "postgres" : nil
        do {
            try chown(directory)
            try await run("initdb", ["-D", dataDirectory, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8"])
            try writeConfiguration()
        } catch {
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
    }

    /// pg_ctl's own wait (`-w`) ends when the server is ready or its postmaster has exited; its
    /// timeout (`-t`, 60 s by default) is only the hang guard here.
    private var pgCtlWait: [String] { ["-w", "-t", "\(hangGuard.components.seconds)"] }

    /// Starts the server and waits until it accepts connections (or fails when it could not start).
    package func start() async throws {
        try await run("pg_ctl", ["-D", dataDirectory, "-l", logFile] + pgCtlWait + ["start"])
        try await waitUntilReady()
    }

    /// `pg_ctl restart -m fast`: ends every session, then waits until the server accepts connections again.
    package func restart() async throws {
        try await run("pg_ctl", ["-D", dataDirectory, "-l", logFile, "-m", "fast"] + pgCtlWait + ["restart"])
        try await waitUntilReady()
    }

    /// Stops the server at once (`-m immediate`, as a crash would) and waits until its postmaster has
    /// exited; `start()` brings it back.
    package func stop() async throws {
        try await run("pg_ctl", ["-D", dataDirectory, "-m", "immediate"] + pgCtlWait + ["stop"])
    }

    /// Runs SQL as `postgres` over the cluster's Unix socket (no TLS, no password) and returns psql's output.
    @discardableResult
    package func psql(_ sql: String) async throws -> String {
        try await run(
            "psql",
            [
                "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", directory, "-p", "\(port)", "-U", "postgres",
                "-d", "postgres", "-c", sql,
            ])
    }

    private func createUsers() async throws {
        for (name, password) in configuration.passwordUsers.sorted(by: { $0.key < $1.key }) {
            let quotedName = "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""
            let quotedPassword = "'" + password.replacingOccurrences(of: "'", with: "''") + "'"
            try await psql("CREATE ROLE \(quotedName) LOGIN SUPERUSER PASSWORD \(quotedPassword)")
        }
    }

    private func destroy() async {
        _ = try? await run("pg_ctl", ["-D", dataDirectory, "-m", "immediate"] + pgCtlWait + ["stop"])
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func writeConfiguration() throws {
        // fsync off is safe for a throwaway cluster: stop() kills processes, not the machine, and commits stay
        // synchronous, so nothing committed is lost across stop() and start().
        var settings = [
            "port": "\(port)", "listen_addresses": "'\(configuration.listenAddresses.joined(separator: ","))'",
            "unix_socket_directories": "'\(directory)'",
            "max_connections": "100", "fsync": "off", "full_page_writes": "off",
            "password_encryption": "'scram-sha-256'",
        ]
        let host = configuration.tls?.requireTLS == true ? "hostssl" : "host"
        let superuserMethod = configuration.tls?.clientCertificateAuthorityPEM == nil ? "trust" : "cert"
        var access = ["local all all trust", "\(host) all postgres 127.0.0.0/8 \(superuserMethod)"]
        if !configuration.passwordUsers.isEmpty { access.append("\(host) all all 127.0.0.0/8 scram-sha-256") }
        if let tls = configuration.tls {
            let certificate = "\(directory)/server.crt", key = "\(directory)/server.key"
            try write(tls.certificateChainPEM, to: certificate, permissions: 0o644)
            try write(tls.privateKeyPEM, to: key, permissions: 0o600)
            settings["ssl"] = "on"
            settings["ssl_cert_file"] = "'\(certificate)'"
            settings["ssl_key_file"] = "'\(key)'"
            if let clientAuthority = tls.clientCertificateAuthorityPEM {
                try write(clientAuthority, to: "\(directory)/client-ca.crt", permissions: 0o644)
                settings["ssl_ca_file"] = "'\(directory)/client-ca.crt'"
            }
        }
        for (name, value) in configuration.settings { settings[name] = value }
        let conf = settings.sorted { $0.key < $1.key }.map { "\($0.key) = \($0.value)" }.joined(separator: "\n") + "\n"
        let existing = try String(contentsOfFile: "\(dataDirectory)/postgresql.conf", encoding: .utf8)
        try write(existing + "\n# PrivateCluster\n" + conf, to: "\(dataDirectory)/postgresql.conf", permissions: 0o600)
        try write(access.joined(separator: "\n") + "\n", to: "\(dataDirectory)/pg_hba.conf", permissions: 0o600)
    }

    private func write(_ text: String, to path: String, permissions: Int) throws {
        try text.write(toFile: path, atomically: false, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: permissions], ofItemAtPath: path)
        try chown(path)
    }

    private func chown(_ path: String) throws {
        guard let owner else { return }
        try FileManager.default.setAttributes([.ownerAccountName: owner], ofItemAtPath: path)
    }

    /// Polls `pg_isready` until the server accepts connections on both ways in, TCP (what the
    /// reconciler uses) and the Unix socket (what ``psql(_:)`` uses): pg_ctl -w already waits, but a
    /// server can be up and still refuse connections while it recovers, and checking only TCP let a
    /// loaded machine's first `psql` over the socket come too early. It waits as long as the
    /// postmaster runs (a probe that gets no answer within its 5 s is only asked again), and fails
    /// at once when the postmaster is gone: a fixed 60 s failed a restart on a loaded machine.
    private func waitUntilReady() async throws {
        let deadline = ContinuousClock.now + hangGuard
        while true {
            var ready = true
            for host in ["127.0.0.1", directory] where ready {
                let probe = try await execute("pg_isready", ["-h", host, "-p", "\(port)", "-U", "postgres", "-d", "postgres", "-t", "5"])
                ready = probe.status == 0
            }
            if ready { return }
            guard postmasterRuns else {
                throw Failure(description: "PostgreSQL on port \(port) stopped before it accepted connections: \(log.suffix(2000))")
            }
            guard ContinuousClock.now < deadline else {
                throw Failure(description: "PostgreSQL on port \(port) still runs but has not accepted connections: \(log.suffix(2000))")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// Whether the postmaster of postmaster.pid (its first line) still runs.
    private var postmasterRuns: Bool {
        guard let pidFile = try? String(contentsOfFile: "\(dataDirectory)/postmaster.pid", encoding: .utf8),
            let pid = pidFile.split(separator: "\n").first.flatMap({ pid_t($0.trimmingCharacters(in: .whitespaces)) })
        else { return false }
        return kill(pid, 0) == 0 || errno == EPERM
    }

    @discardableResult
    private func run(_ tool: String, _ arguments: [String]) async throws -> String {
        let result = try await execute(tool, arguments)
        guard result.status == 0 else {
            throw Failure(
                description: "\(tool) \(arguments.joined(separator: " ")) exited \(result.status): \(result.output.suffix(2000))\n\(log.suffix(2000))"
            )
        }
        return result.output
    }

    /// Runs one of PostgreSQL's programs, as the cluster's owner, with a clean environment (no PGHOST or
    /// PGPORT of the shared test cluster).
    ///
    /// It uses posix_spawn rather than Foundation's Process: `pg_ctl start` leaves a server behind that would
    /// inherit Process's exit-detection socket (so the start never seems to end) and any descriptor of the test
    /// process, such as another test's pipes. The child gets only stdin, stdout and stderr.
    private func execute(_ tool: String, _ arguments: [String]) async throws -> (status: Int32, output: String) {
        var command = ["\(binDirectory)/\(tool)"] + arguments
        if let owner { command = [try Self.which("runuser"), "-u", owner, "--"] + command }
        let outputPath = "\(directory)/.\(tool)-\(UUID().uuidString.prefix(8)).out"
        _ = FileManager.default.createFile(atPath: outputPath, contents: nil)
        defer { try? FileManager.default.removeItem(atPath: outputPath) }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_APPEND, 0)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        Self.closeOtherDescriptors(&actions)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t(), allSignals = sigset_t()
        sigemptyset(&noSignals)
        sigfillset(&allSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let environment = ["PATH=\(ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")", "LC_ALL=C.UTF-8"]
        let argv = command.map { strdup($0) } + [nil]
        let envp = environment.map { strdup($0) } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var pid = pid_t()
        let spawned = posix_spawn(&pid, command[0], &actions, &attributes, argv, envp)
        guard spawned == 0 else { throw Failure(description: "cannot run \(command[0]): \(String(cString: strerror(spawned)))") }
        var status: Int32 = 0
        // Polls rather than blocking a thread of the cooperative pool.
        while true {
            let result = waitpid(pid, &status, WNOHANG)
            if result == pid { break }
            if result == -1 && errno != EINTR { throw Failure(description: "waitpid: \(String(cString: strerror(errno)))") }
            try await Task.sleep(for: .milliseconds(10))
        }
        let exitStatus = status & 0x7F == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
        return (exitStatus, (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "")
    }

    /// Closes every descriptor above stderr in the child: glibc's closefrom action when there is one, else
    /// a close action for each descriptor open now.
    private static func closeOtherDescriptors(_ actions: inout posix_spawn_file_actions_t) {
        typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        if let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") {
            _ = unsafeBitCast(symbol, to: CloseFrom.self)(&actions, 3)
            return
        }
        let open = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []).compactMap { Int32($0) }
        for descriptor in open where descriptor > 2 { posix_spawn_file_actions_addclose(&actions, descriptor) }
    }

    private static func findBinDirectory() throws -> String {
        if let configured = ProcessInfo.processInfo.environment["PG_BINDIR"], !configured.isEmpty { return configured }
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? [])
            .filter { FileManager.default.isExecutableFile(atPath: "\(root)/\($0)/bin/initdb") }
            .sorted { $0.compare($1, options: .numeric) == .orderedAscending }
        guard let newest = versions.last else {
            throw Failure(description: "PostgreSQL server binaries not found: install the 'postgresql' package or set PG_BINDIR")
        }
        return "\(root)/\(newest)/bin"
    }

    private static func which(_ tool: String) throws -> String {
        let path = (ProcessInfo.processInfo.environment["PATH"] ?? "") + ":/usr/sbin:/sbin:/usr/bin:/bin"
        for directory in path.split(separator: ":") where FileManager.default.isExecutableFile(atPath: "\(directory)/\(tool)") {
            return "\(directory)/\(tool)"
        }
        throw Failure(description: "\(tool) not found")
    }
}
