import Foundation
import ReconcilerDomain

#if canImport(Glibc)
import Glibc
#endif

/// Concurrent senders for the webhook bench that cost the machine little: each is a thread with
/// one kept-alive HTTP/1.1 connection, posting one body and reading its whole answer with blocking
/// socket calls before the next, as one of Apple's senders does. On this 2-core machine the
/// senders share the cores with `serve` and PostgreSQL (Apple's senders do not), and
/// AsyncHTTPClient's senders used about 205 µs of CPU per notification, an eighth of the machine.
///
/// ```swift
/// let senders = try SocketSenders(url: "http://127.0.0.1:8080", path: "/notifications")
/// let (latencies, failures) = await senders.post(bodies, senders: 16)
/// ```
struct SocketSenders: Sendable {
    let host: String
    let port: Int
    let path: String

    init(url: String, path: String) throws {
        guard let components = URLComponents(string: url), components.scheme == "http", let host = components.host else {
            throw SocketSendersError(description: "the socket senders take an http:// URL with a host, not \(url)")
        }
        (self.host, self.port, self.path) = (host, components.port ?? 80, path)
    }

    /// Posts each body once (JSON, in order of taking), `senders` at a time; every answer's
    /// latency and the reason of each that was not a 200 (a failed connection included).
    func post(_ bodies: [String], senders: Int) async -> (latencies: [Duration], failures: [String]) {
        let next = Locked(0)
        let results = Locked<(latencies: [Duration], failures: [String])>(([], []))
        let group = DispatchGroup()
        for _ in 0..<senders {
            group.enter()
            let thread = Thread {
                let mine = send(bodies, next: next)
                results.withLock { all in
                    all.latencies += mine.latencies
                    all.failures += mine.failures
                }
                group.leave()
            }
            thread.start()
        }
        await withCheckedContinuation { continuation in group.notify(queue: .global()) { continuation.resume() } }
        return results.withLock { $0 }
    }

    /// One sender's loop: take the next body, post it, read the answer; reconnect after a failure.
    private func send(_ bodies: [String], next: Locked<Int>) -> (latencies: [Duration], failures: [String]) {
        let clock = ContinuousClock()
        var latencies: [Duration] = []
        var failures: [String] = []
        var connection: Int32?
        var request: [UInt8] = []
        var answer = [UInt8](repeating: 0, count: 1 << 16)
        defer { if let connection { close(connection) } }
        while true {
            let index = Self.take(next)
            guard index < bodies.count else { break }
            postRequest(carrying: bodies[index], into: &request)
            let sent = clock.now
            let failure = exchange(request, on: &connection, answer: &answer)
            latencies.append(clock.now - sent)
            if let failure { failures.append(failure) }
        }
        return (latencies, failures)
    }

    /// The next index to send, taken once by one sender.
    private static func take(_ next: Locked<Int>) -> Int {
        next.withLock { value in
            defer { value += 1 }
            return value
        }
    }

    /// `POST path` with the body `{"signedPayload":"<JWS>"}`, written into `request` in place (not
    /// built apart and copied).
    func postRequest(carrying payload: String, into request: inout [UInt8]) {
        let (opening, closing) = (#"{"signedPayload":""#.utf8, #""}"#.utf8)
        let length = opening.count + payload.utf8.count + closing.count
        request.removeAll(keepingCapacity: true)
        request += "POST \(path) HTTP/1.1\r\nHost: \(host):\(port)\r\nContent-Type: application/json\r\nContent-Length: \(length)\r\n\r\n".utf8
        request += opening
        request += payload.utf8
        request += closing
    }

    /// `GET path?query` with these headers.
    func getRequest(query: String, headers: [(String, String)]) -> [UInt8] {
        Array(
            ("GET \(path)?\(query) HTTP/1.1\r\nHost: \(host):\(port)\r\n" + headers.map { "\($0.0): \($0.1)\r\n" }.joined() + "\r\n").utf8)
    }

    /// Writes one request on the kept-alive connection (opened if there is none) and reads its whole
    /// answer: nil for a 200, else why not (the connection is closed after a failure to send or read).
    private func exchange(_ request: [UInt8], on connection: inout Int32?, answer: inout [UInt8]) -> String? {
        do {
            let socket = try connection ?? connect()
            connection = socket
            try write(request, to: socket)
            let status = try readAnswer(from: socket, into: &answer)
            return status == 200 ? nil : "HTTP \(status)"
        } catch {
            if let socket = connection { close(socket) }
            connection = nil
            return "\(error)"
        }
    }

    /// Open loop at a fixed rate: request `i` (of `count`, made by `request(i)`) is due `i / perSecond`
    /// seconds after the start, whether or not earlier answers came back, and is sent by the first
    /// of `connections` threads free at that moment (one kept-alive connection each). Each latency
    /// runs from the moment the request was due, not from when a thread could send it, so a server
    /// that falls behind shows its queue in the latencies (no coordinated omission), as long as
    /// `connections` does not run out; `late` counts the requests sent over 1 ms after they were due.
    func paced(
        count: Int, perSecond rate: Double, connections: Int, request: @escaping @Sendable (Int) -> [UInt8]
    ) async -> PacedResult {
        let next = Locked(0)
        let results = Locked(PacedResult())
        let clock = ContinuousClock()
        // The threads start before the first request is due.
        let start = clock.now + .milliseconds(200)
        let group = DispatchGroup()
        for _ in 0..<connections {
            group.enter()
            let thread = Thread {
                var mine = PacedResult()
                var connection: Int32?
                var answer = [UInt8](repeating: 0, count: 1 << 16)
                defer { if let connection { close(connection) } }
                while true {
                    let index = Self.take(next)
                    guard index < count else { break }
                    let bytes = request(index)
                    let due = start + .nanoseconds(Int64(Double(index) * 1e9 / rate))
                    let wait = due - clock.now
                    if wait > .zero { Thread.sleep(forTimeInterval: wait.seconds) }
                    if clock.now - due > .milliseconds(1) { mine.late += 1 }
                    let failure = exchange(bytes, on: &connection, answer: &answer)
                    let done = clock.now
                    mine.latencies.append(done - due)
                    mine.seconds = max(mine.seconds, (done - start).seconds)
                    if let failure { mine.failures.append(failure) }
                }
                results.withLock { all in
                    all.latencies += mine.latencies
                    all.failures += mine.failures
                    all.late += mine.late
                    all.seconds = max(all.seconds, mine.seconds)
                }
                group.leave()
            }
            thread.start()
        }
        await withCheckedContinuation { continuation in group.notify(queue: .global()) { continuation.resume() } }
        return results.withLock { $0 }
    }

    private func connect() throws(SocketSendersError) -> Int32 {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &found) == 0, let address = found else {
            throw SocketSendersError(description: "cannot resolve \(host)")
        }
        defer { freeaddrinfo(found) }
        let socket = Glibc.socket(address.pointee.ai_family, address.pointee.ai_socktype, address.pointee.ai_protocol)
        guard socket >= 0 else { throw SocketSendersError(description: "socket: errno \(errno)") }
        // Each request is written whole, then the answer awaited: no reason to wait for more to send.
        var on: Int32 = 1
        setsockopt(socket, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
        // An answer not read within 30 s is a failure (as AsyncHTTPClient's read timeout was), not a sender stuck for ever.
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(socket, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        guard Glibc.connect(socket, address.pointee.ai_addr, address.pointee.ai_addrlen) == 0 else {
            let failure = errno
            close(socket)
            throw SocketSendersError(description: "connect to \(host):\(port): errno \(failure)")
        }
        return socket
    }

    private func write(_ bytes: [UInt8], to socket: Int32) throws(SocketSendersError) {
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes { Glibc.send(socket, $0.baseAddress! + written, $0.count - written, Int32(MSG_NOSIGNAL)) }
            guard count > 0 else { throw SocketSendersError(description: "send: errno \(errno)") }
            written += count
        }
    }

    /// Reads one whole answer (its head, then `Content-Length` bytes of body); returns its status.
    private func readAnswer(from socket: Int32, into buffer: inout [UInt8]) throws(SocketSendersError) -> Int {
        var received = 0
        var headEnd: Int?
        var needed = Int.max
        while received < needed {
            if received == buffer.count { throw SocketSendersError(description: "an answer over \(buffer.count) bytes") }
            let count = buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress! + received, $0.count - received, 0) }
            guard count > 0 else { throw SocketSendersError(description: count == 0 ? "the connection was closed" : "recv: errno \(errno)") }
            received += count
            if headEnd == nil, let end = Self.headEnd(in: buffer[..<received]) {
                headEnd = end
                guard let length = Self.contentLength(in: buffer[..<end]) else {
                    throw SocketSendersError(description: "an answer without Content-Length")
                }
                needed = end + length
            }
        }
        // "HTTP/1.1 200 OK": the three digits after the first space.
        guard let space = buffer.firstIndex(of: UInt8(ascii: " ")), space + 4 <= received,
            let status = Int(String(decoding: buffer[(space + 1)..<(space + 4)], as: UTF8.self))
        else { throw SocketSendersError(description: "an answer without a status line") }
        return status
    }

    /// Where the head ends (after its blank line), if it has.
    private static func headEnd(in bytes: ArraySlice<UInt8>) -> Int? {
        let blankLine: [UInt8] = Array("\r\n\r\n".utf8)
        guard bytes.count >= blankLine.count else { return nil }
        for start in bytes.startIndex...(bytes.endIndex - blankLine.count) where bytes[start..<(start + 4)].elementsEqual(blankLine) {
            return start + blankLine.count
        }
        return nil
    }

    private static func contentLength(in head: ArraySlice<UInt8>) -> Int? {
        for line in String(decoding: head, as: UTF8.self).split(separator: "\r\n") {
            let parts = line.split(separator: ":", maxSplits: 1)
            if parts.count == 2, parts[0].lowercased() == "content-length" {
                return Int(parts[1].trimmingCharacters(in: .whitespaces))
            }
        }
        return nil
    }
}

/// What an open-loop sender measured: each request's latency from when it was due, why those not
/// answered 200 were not, how many were sent over 1 ms late, and the seconds from the first due
/// moment to the last answer.
struct PacedResult: Sendable {
    var latencies: [Duration] = []
    var failures: [String] = []
    var late = 0
    var seconds = 0.0

    /// The latency at `share` (0.5 is the median, 1 the maximum), in milliseconds.
    func percentile(_ share: Double) -> Double {
        let sorted = latencies.sorted()
        guard !sorted.isEmpty else { return .nan }
        return sorted[min(sorted.count - 1, Int(Double(sorted.count) * share))].seconds * 1000
    }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

struct SocketSendersError: Error, CustomStringConvertible {
    var description: String
}
