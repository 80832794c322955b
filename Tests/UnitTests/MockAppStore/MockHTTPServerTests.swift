import Foundation
import NIOHTTP1
import TestSupport
import Testing

@testable import MockAppStore

/// The mock's HTTP server on SwiftNIO.
@Suite struct MockHTTPServerTests {
    /// Stopping the server while connections keep arriving traps nothing. A connection accepted as
    /// the server stopped was dropped without being read, and a dropped NIOAsyncChannel traps the
    /// whole process ("Deinited NIOAsyncWriter without calling finish()", apple/swift-nio#2637): a
    /// full test run crashed that way once, and this test crashed on that code every time it ran.
    /// Each round stops a server once connections are arriving, while they keep arriving; a crash
    /// fails the run.
    @Test func stoppingWhileConnectionsArriveTrapsNothing() async throws {
        for _ in 0..<25 {
            let (ports, bound) = AsyncStream.makeStream(of: Int.self)
            let server = MockHTTPServer(host: "127.0.0.1", port: 0) { _ in MockHTTPResponse(status: .ok) }
            let serving = Task {
                defer { bound.finish() }
                try await server.run { bound.yield($0) }
            }
            var iterator = ports.makeAsyncIterator()
            let port = try #require(await iterator.next())
            // Connections arrive until the server has stopped; the server stops once ten connected.
            let (connected, tenConnected) = AsyncStream.makeStream(of: Void.self)
            let connecting = Task.detached {
                var count = 0
                while connectAndClose(port: port) {
                    count += 1
                    if count == 10 { tenConnected.yield() }
                }
                tenConnected.finish()
                return count
            }
            for await _ in connected { break }
            serving.cancel()
            _ = try? await serving.value
            #expect(await connecting.value >= 10)
        }
    }
}
