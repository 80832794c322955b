package import Foundation
import Synchronization
import Testing

/// How long a wait that ends on its reason (a process exits, prints its line, a server accepts
/// connections or is gone) may last at most: a guard against a hang, never a judgement of speed. A
/// loaded machine (other builds beside the tests) makes a debug binary's start or a PostgreSQL
/// restart take minutes, and such a wait must still end on what happened, not on the clock.
package let hangGuard: Duration = .seconds(600)

/// Runs the project's executables (`reconciler`, `mock-appstore`) as real processes.
package enum Executables {
    /// The directory the build put the executables in, next to the test bundle.
    package static let directory: URL = {
        let candidates = [
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent(),
            Bundle.main.bundleURL,
            Bundle.main.bundleURL.deletingLastPathComponent(),
        ]
        for candidate in candidates where FileManager.default.isExecutableFile(atPath: candidate.appendingPathComponent("reconciler").path) {
            return candidate
        }
        return candidates[0]
    }()

    package static func url(_ name: String) -> URL { directory.appendingPathComponent(name) }
}

/// A finished process.
package struct ProcessResult {
    package var status: Int32
    package var stdout: String
    package var stderr: String
}

/// A running process whose output is collected into files.
package final class RunningProcess: @unchecked Sendable {
    package let process: ChildProcess
    package let stdoutURL: URL
    package let stderrURL: URL
    /// Holds the output files; removed with this object (after the process is stopped), so tests
    /// leave nothing in /tmp.
    package let directory: TemporaryDirectory

    /// With `standardOutput`, the process writes there (the write end of a ``ReaderPipe``, say)
    /// instead of into ``stdoutURL``.
    package init(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:], stdin: Data? = nil,
        standardOutput: FileHandle? = nil
    ) throws {
        directory = try TemporaryDirectory.create("proc")
        stdoutURL = directory.url.appendingPathComponent("stdout")
        stderrURL = directory.url.appendingPathComponent("stderr")
        _ = FileManager.default.createFile(atPath: stdoutURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: stderrURL.path, contents: nil)
        let executableURL = executable.hasPrefix("/") ? URL(fileURLWithPath: executable) : Executables.url(executable)
        var merged = ProcessInfo.processInfo.environment
        for (key, value) in environment { merged[key] = value }
        let output = try standardOutput ?? FileHandle(forWritingTo: stdoutURL)
        let errors = try FileHandle(forWritingTo: stderrURL)
        let input: FileHandle
        if let stdin {
            // From a file, not a pipe: writing more than a pipe holds blocked this thread, one of the
            // cooperative pool's few, until the child (slow to start on a loaded machine) read it.
            let stdinURL = directory.url.appendingPathComponent("stdin")
            try stdin.write(to: stdinURL)
            input = try FileHandle(forReadingFrom: stdinURL)
        } else {
            input = FileHandle.nullDevice
        }
        // The child has its own copies; this process's are closed once it started.
        defer {
            for handle in [output, errors, input] where handle !== standardOutput && handle !== FileHandle.nullDevice { try? handle.close() }
        }
        process = try ChildProcess(
            executable: executableURL, arguments: arguments, environment: merged, stdin: input.fileDescriptor,
            stdout: output.fileDescriptor, stderr: errors.fileDescriptor)
    }

    deinit {
        // A process a failed test left running is stopped first: nothing writes into the directory after it is removed.
        kill()
        directory.remove()
    }

    package var stdout: String { (try? String(contentsOf: stdoutURL, encoding: .utf8)) ?? "" }
    package var stderr: String { (try? String(contentsOf: stderrURL, encoding: .utf8)) ?? "" }

    /// Waits for the process to end, polling so no thread blocks.
    package func wait(timeout: Duration = hangGuard) async throws -> ProcessResult {
        let deadline = ContinuousClock.now + timeout
        while process.isRunning {
            if ContinuousClock.now > deadline {
                process.terminate()
                Issue.record("\(process.executableURL?.lastPathComponent ?? "process") timed out: \(stderr.suffix(2000))")
                break
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        while process.isRunning { try await Task.sleep(for: .milliseconds(20)) }
        return ProcessResult(status: process.terminationStatus, stdout: stdout, stderr: stderr)
    }

    package func signal(_ signal: Int32) { Foundation.kill(process.processIdentifier, signal) }

    /// Stops the process at once (SIGKILL) and waits until it has ended, so nothing it does outlives the call.
    package func kill() {
        guard process.isRunning else { return }
        signal(SIGKILL)
        process.waitUntilExit()
    }

    /// Waits until a line of stderr or stdout contains `text`; fails at once when this process, or
    /// one it depends on (`alongside`), has exited.
    package func waitForOutput(containing text: String, timeout: Duration = hangGuard, alongside others: [RunningProcess] = []) async throws {
        let deadline = ContinuousClock.now + timeout
        while !(stderr.contains(text) || stdout.contains(text)) {
            guard process.isRunning else {
                throw ProcessFailure(description: "exited (\(process.terminationStatus)) before printing \"\(text)\": \(stderr.suffix(3000))")
            }
            if let gone = others.first(where: { !$0.process.isRunning }) {
                throw ProcessFailure(
                    description: "\(gone.process.executableURL?.lastPathComponent ?? "a process") exited (\(gone.process.terminationStatus)) "
                        + "while waiting for \"\(text)\": \(gone.stderr.suffix(3000))")
            }
            guard ContinuousClock.now < deadline else { throw ProcessFailure(description: "no \"\(text)\" in time: \(stderr.suffix(3000))") }
            try await Task.sleep(for: .milliseconds(20))
        }
    }
}

/// A pipe a test reads a process's output from, and closes to play a reader that went away (`| head -1`,
/// a consumer that died). Both ends close on exec, so no other process the tests start keeps the
/// write end open (the child gets it as its standard output, which does not close).
///
/// ```swift
/// let pipe = try ReaderPipe()
/// let process = try RunningProcess("reconciler", ["changes", "--since", "0"], standardOutput: pipe.writing)
/// pipe.closeWriting()
/// let first = try await pipe.readLine()
/// pipe.closeReading()
/// ```
package final class ReaderPipe: @unchecked Sendable {
    package let reading: FileHandle
    package let writing: FileHandle
    private var buffered = Data()

    package init() throws {
        var descriptors: [Int32] = [0, 0]
        guard pipe(&descriptors) == 0 else { throw ProcessFailure(description: "pipe: errno \(errno)") }
        for descriptor in descriptors { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
        // The read end (this process's only) does not block: a read waits by sleeping its task, not
        // by holding one of the few threads every test's waits run on.
        _ = fcntl(descriptors[0], F_SETFL, fcntl(descriptors[0], F_GETFL) | O_NONBLOCK)
        // The smallest pipe Linux makes (one page, F_SETPIPE_SZ): a writer fills it after a few lines
        // and is still writing when the test closes the read end.
        _ = fcntl(descriptors[1], 1031, 4096)
        reading = FileHandle(fileDescriptor: descriptors[0], closeOnDealloc: true)
        writing = FileHandle(fileDescriptor: descriptors[1], closeOnDealloc: true)
    }

    /// Closes this process's copy of the write end, once the child has its own.
    package func closeWriting() { try? writing.close() }

    /// Closes the read end: the writer's next write fails with EPIPE, and its descriptor reports POLLERR.
    package func closeReading() { try? reading.close() }

    /// The next line (without its newline), once it is whole; `nil` at the end. It polls: a blocking
    /// read held a thread of the cooperative pool (two on a 2-core machine) until the writer, a
    /// process starting slowly on a loaded machine, printed, and every other test's waits stalled.
    package func readLine() async throws -> String? {
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            if let newline = buffered.firstIndex(of: UInt8(ascii: "\n")) {
                defer { buffered.removeSubrange(...newline) }
                return String(decoding: buffered[..<newline], as: UTF8.self)
            }
            let count = read(reading.fileDescriptor, &chunk, chunk.count)
            if count > 0 {
                buffered.append(contentsOf: chunk[..<count])
            } else if count == 0 {
                return nil
            } else if errno == EAGAIN || errno == EINTR {
                try await Task.sleep(for: .milliseconds(10))
            } else {
                throw ProcessFailure(description: "reading the pipe: errno \(errno)")
            }
        }
    }
}

package struct ProcessFailure: Error, CustomStringConvertible {
    package var description: String

    package init(description: String) { self.description = description }
}

/// Runs an executable to completion.
package func runProcess(
    _ executable: String, _ arguments: [String], environment: [String: String] = [:], stdin: Data? = nil,
    timeout: Duration = hangGuard
) async throws -> ProcessResult {
    try await RunningProcess(executable, arguments, environment: environment, stdin: stdin).wait(timeout: timeout)
}

/// A TCP port nothing listens on right now, below the ephemeral range (a port the kernel may hand
/// to any outgoing connection, a pooled PostgreSQL connection or an HTTP client, could be taken
/// between this check and the child process binding it), and never one this process handed out
/// before: two tests that each got a port and start their servers slowly on a loaded machine
/// must not get the same one. A server that must keep its port while it is down (a restart)
/// holds a ``PortReservation`` instead.
package func freePort() -> Int {
    for _ in 0..<1000 {
        let port = Int.random(in: listeningPorts)
        if isFreePort(port), handedOutPorts.withLock({ $0.insert(port).inserted }) { return port }
    }
    return Int.random(in: listeningPorts)
}

/// Whether a plain bind of `port` on 127.0.0.1 succeeds now: nothing listens on it and nothing
/// holds it (a ``PortReservation`` does, in any process).
package func isFreePort(_ port: Int) -> Bool {
    let socket = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(socket) }
    return withLoopbackAddress(port: port) { bind(socket, $0, $1) } == 0
}

/// The ports ``freePort()`` and ``PortReservation`` handed out in this process.
private let handedOutPorts = Mutex<Set<Int>>([])

/// A port on 127.0.0.1 kept for one server across its restarts: a socket bound to it with
/// SO_REUSEADDR that never listens. The server binds the port beside it (PostgreSQL and SwiftNIO
/// set SO_REUSEADDR too), while every plain bind fails, so ``freePort()`` here or in another test
/// process beside this one skips the port while the server is down. Released on deinit.
package final class PortReservation: Sendable {
    package let port: Int
    private let socket: Int32

    package init() throws {
        for _ in 0..<1000 {
            let port = Int.random(in: listeningPorts)
            guard !handedOutPorts.withLock({ $0.contains(port) }) else { continue }
            let socket = Foundation.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard socket >= 0 else { break }
            var on: Int32 = 1
            setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
            // A plain bind first: SO_REUSEADDR alone would also share a port a stopped server left in TIME_WAIT.
            guard isFreePort(port), withLoopbackAddress(port: port, { bind(socket, $0, $1) }) == 0,
                handedOutPorts.withLock({ $0.insert(port).inserted })
            else {
                close(socket)
                continue
            }
            (self.port, self.socket) = (port, socket)
            return
        }
        throw ProcessFailure(description: "no free port to reserve below the ephemeral range")
    }

    deinit { close(socket) }
}

/// The ports `freePort()` picks from: from 20000 up to where the kernel's ephemeral ports start
/// (32768 on Linux by default), or 20000...60000 where that cannot be read.
private let listeningPorts: ClosedRange<Int> = {
    let range = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)) ?? ""
    guard let ephemeralStart = range.split(whereSeparator: \.isWhitespace).first.flatMap({ Int($0) }), ephemeralStart > 21_000 else {
        return 20000...60000
    }
    return 20000...(ephemeralStart - 1)
}()

/// Opens a TCP connection to `port` on 127.0.0.1 and closes it at once; whether it connected.
@discardableResult
package func connectAndClose(port: Int) -> Bool {
    let socket = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard socket >= 0 else { return false }
    defer { close(socket) }
    return withLoopbackAddress(port: port) { connect(socket, $0, $1) } == 0
}

/// Calls `body` with 127.0.0.1:`port` as a `sockaddr` and its length.
private func withLoopbackAddress<Result>(port: Int, _ body: (UnsafePointer<sockaddr>, socklen_t) -> Result) -> Result {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
}

/// A child process started with posix_spawn(3), in place of Foundation's `Process`.
///
/// Why: on Linux, `Process.run()` of the Foundation that ships with Swift 6.3.1 lists
/// `/proc/self/fd` by copying each entry's whole 256-byte `d_name`, past the end of glibc's
/// buffer when an entry sits at its tail (swift-corelibs-foundation pull request 5472, fixed
/// after this release). A test process holds many descriptors (connections, servers, pipes), and
/// the copy crashed it with SIGSEGV in `memcpy` while starting a child (ScheduleTests, 2 of 3 runs).
/// This starts the child the way `Process` does, without that listing: the three standard
/// descriptors set, every other descriptor closed in the child (`closefrom`), every signal at its
/// default and none blocked (the test process ignores SIGPIPE; its children must not).
package final class ChildProcess: @unchecked Sendable {
    package let executableURL: URL?
    package let processIdentifier: pid_t
    /// The wait status once reaped (`waitpid`); guarded by `lock`, since `isRunning` and waits are
    /// asked from several tasks and a child is reaped once.
    private var waitStatus: Int32?
    private let lock = NSLock()

    init(executable: URL, arguments: [String], environment: [String: String], stdin: Int32, stdout: Int32, stderr: Int32) throws {
        executableURL = executable
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (from, to) in [(stdin, STDIN_FILENO), (stdout, STDOUT_FILENO), (stderr, STDERR_FILENO)] {
            posix_spawn_file_actions_adddup2(&actions, from, to)
        }
        // glibc 2.34 and later; not in the Glibc module Swift imports, so looked up by name.
        guard let closeFrom = Self.addCloseFrom else {
            throw ProcessFailure(description: "posix_spawn_file_actions_addclosefrom_np is missing: glibc 2.34 or later is needed")
        }
        _ = closeFrom(&actions, 3)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var all = sigset_t(), none = sigset_t()
        sigfillset(&all)
        sigemptyset(&none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
        let argv = ([executable.path] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        var pid = pid_t()
        let result = posix_spawn(&pid, executable.path, &actions, &attributes, argv, envp)
        guard result == 0 else {
            throw ProcessFailure(description: "cannot start \(executable.path): \(String(cString: strerror(result)))")
        }
        processIdentifier = pid
    }

    private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    private static let addCloseFrom: AddCloseFrom? = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np")
        .map { unsafeBitCast($0, to: AddCloseFrom.self) }

    /// Reaps the child if it has ended (or, `blocking`, once it ends); its wait status, or `nil`.
    private func reap(blocking: Bool) -> Int32? {
        lock.lock()
        defer { lock.unlock() }
        if let waitStatus { return waitStatus }
        var status: Int32 = 0
        while true {
            let reaped = waitpid(processIdentifier, &status, blocking ? 0 : WNOHANG)
            if reaped == processIdentifier {
                waitStatus = status
                return status
            }
            if reaped == -1 && errno == EINTR { continue }
            return nil
        }
    }

    package var isRunning: Bool { reap(blocking: false) == nil }

    /// As `Process` reports it: the exit code, or the signal that ended the child; -1 while it runs.
    package var terminationStatus: Int32 {
        guard let status = reap(blocking: false) else { return -1 }
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : signal
    }

    /// SIGTERM, as `Process.terminate()`.
    package func terminate() { _ = kill(processIdentifier, SIGTERM) }

    package func waitUntilExit() { _ = reap(blocking: true) }
}
