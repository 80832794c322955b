import Foundation
import NIOHTTP1
import Testing

@testable import MockAppStore

#if canImport(Glibc)
import Glibc
#endif

/// The mock's HTTP server on SwiftNIO.
@Suite struct MockHTTPServerTests {
    /// Stopping the server while connections keep arriving traps nothing. A connection accepted as
    /// the server stopped was dropped without being read, and a dropped NIOAsyncChannel traps the
    /// whole process ("Deinited NIOAsyncWriter without calling finish()", apple/swift-nio#2637): a
    /// full test run crashed that way once, and this test crashed on that code every time it ran.
    /// Each round stops a server under a stream of connections; a crash fails the run.
    @Test func stoppingWhileConnectionsArriveTrapsNothing() async throws {
        for _ in 0..<25 {
            let (ports, bound) = AsyncStream.makeStream(of: Int.self)
            let server = MockHTTPServer(host: "127.0.0.1", port: 0) { _ in MockHTTPResponse(status: .ok) }
            let serving = Task { try await server.run { bound.yield($0) } }
            var iterator = ports.makeAsyncIterator()
            let port = try #require(await iterator.next())
            let connecting = Task.detached {
                for _ in 0..<100 { Self.connectAndClose(port: port) }
            }
            try await Task.sleep(for: .milliseconds(5))  // not timing: lets some connections be accepted first
            serving.cancel()
            _ = try? await serving.value
            await connecting.value
        }
    }

    /// Opens a TCP connection to `port` on 127.0.0.1 and closes it (a refused one does nothing).
    private static func connectAndClose(port: Int) {
        let socketDescriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socketDescriptor >= 0 else { return }
        defer { close(socketDescriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socketDescriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
    }
}
