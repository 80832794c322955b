package import Foundation
import Testing

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
    package let process = Process()
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
        process.executableURL = executable.hasPrefix("/") ? URL(fileURLWithPath: executable) : Executables.url(executable)
        process.arguments = arguments
        var merged = ProcessInfo.processInfo.environment
        for (key, value) in environment { merged[key] = value }
        process.environment = merged
        process.standardOutput = try standardOutput ?? FileHandle(forWritingTo: stdoutURL)
        process.standardError = try FileHandle(forWritingTo: stderrURL)
        if let stdin {
            let pipe = Pipe()
            process.standardInput = pipe
            try process.run()
            pipe.fileHandleForWriting.write(stdin)
            try pipe.fileHandleForWriting.close()
        } else {
            process.standardInput = FileHandle.nullDevice
            try process.run()
        }
    }

    deinit {
        // A process a failed test left running is stopped first: nothing writes into the directory after it is removed.
        kill()
        directory.remove()
    }

    package var stdout: String { (try? String(contentsOf: stdoutURL, encoding: .utf8)) ?? "" }
    package var stderr: String { (try? String(contentsOf: stderrURL, encoding: .utf8)) ?? "" }

    /// Waits for the process to end, polling so no thread blocks.
    package func wait(timeout: Duration = .seconds(600)) async throws -> ProcessResult {
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
    package func waitForOutput(containing text: String, timeout: Duration = .seconds(120), alongside others: [RunningProcess] = []) async throws {
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
/// let first = pipe.readLine()
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

    /// The next line (without its newline), blocking until it is whole; `nil` at the end.
    package func readLine() -> String? {
        while true {
            if let newline = buffered.firstIndex(of: UInt8(ascii: "\n")) {
                defer { buffered.removeSubrange(...newline) }
                return String(decoding: buffered[..<newline], as: UTF8.self)
            }
            let more = reading.availableData
            guard !more.isEmpty else { return nil }
            buffered.append(more)
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
    timeout: Duration = .seconds(600)
) async throws -> ProcessResult {
    try await RunningProcess(executable, arguments, environment: environment, stdin: stdin).wait(timeout: timeout)
}

/// A TCP port nothing listens on right now, below the ephemeral range: a port the kernel may
/// hand to any outgoing connection (a pooled PostgreSQL connection, an HTTP client) could be taken
/// between this check and the child process binding it, or while a restarted server is down.
package func freePort() -> Int {
    for _ in 0..<100 {
        let port = Int.random(in: listeningPorts)
        let socket = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(socket) }
        let bound = withLoopbackAddress(port: port) { bind(socket, $0, $1) }
        if bound == 0 { return port }
    }
    return Int.random(in: listeningPorts)
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
