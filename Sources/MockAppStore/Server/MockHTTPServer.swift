import Foundation
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import NIOPosix
import Synchronization

/// A request as the mock's endpoints see it.
struct MockHTTPRequest: Sendable {
    var method: HTTPMethod
    var path: String
    var query: [(name: String, value: String)]
    var headers: HTTPHeaders
    var body: ByteBuffer
    /// When the request arrived, UNIX ms.
    var arrivedAt: Int64
    /// Completes when the client's connection closes (a client that gave up on the answer).
    var connectionClosed: EventLoopFuture<Void>?

    func queryValues(_ name: String) -> [String] { query.filter { $0.name == name }.map(\.value) }
    func queryValue(_ name: String) -> String? { queryValues(name).first }
}

/// A response, possibly sabotaged on the wire.
struct MockHTTPResponse: Sendable {
    enum Delivery: Sendable {
        case normal
        /// Close the connection without answering.
        case drop
        /// Announce the full length, send part of the body, close.
        case truncate
    }

    var status: HTTPResponseStatus
    var headers: HTTPHeaders = [:]
    var body: ByteBuffer = ByteBuffer()
    var delivery: Delivery = .normal

    static func json(_ status: HTTPResponseStatus, _ data: Data, headers: HTTPHeaders = [:]) -> MockHTTPResponse {
        var headers = headers
        headers.replaceOrAdd(name: "Content-Type", value: "application/json")
        return MockHTTPResponse(status: status, headers: headers, body: ByteBuffer(data: data))
    }

    static func json(_ status: HTTPResponseStatus, _ value: some Encodable, headers: HTTPHeaders = [:]) -> MockHTTPResponse {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return json(status, (try? encoder.encode(value)) ?? Data("{}".utf8), headers: headers)
    }

    static func text(_ status: HTTPResponseStatus, _ text: String, contentType: String = "text/plain; charset=utf-8") -> MockHTTPResponse {
        MockHTTPResponse(status: status, headers: ["Content-Type": contentType], body: ByteBuffer(string: text))
    }
}

/// An HTTP/1.1 server on SwiftNIO with wire-level control, so faults such as dropped
/// connections and truncated bodies are real.
struct MockHTTPServer: Sendable {
    typealias Handler = @Sendable (MockHTTPRequest) async -> MockHTTPResponse

    let host: String
    let port: Int
    let handler: Handler

    /// Binds, calls `onBound` with the port, and serves until cancelled.
    func run(onBound: @Sendable (Int) async throws -> Void) async throws {
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 512)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .bind(host: host, port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    let connection = try NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>(wrappingChannelSynchronously: channel)
                    Self.keep(connection)
                    return connection
                }
            }
        try await onBound(server.channel.localAddress?.port ?? port)
        try await withTaskCancellationHandler {
            try await withThrowingDiscardingTaskGroup { group in
                try await server.executeThenClose { connections in
                    for try await connection in connections {
                        group.addTask { await serve(connection) }
                    }
                }
            }
        } onCancel: {
            server.channel.close(promise: nil)
        }
    }

    /// Accepted connections no task has taken yet. A connection accepted while the server stops
    /// may never be read from the server's stream, and a dropped NIOAsyncChannel whose writer was
    /// never finished traps the whole process ("Deinited NIOAsyncWriter without calling finish()",
    /// apple/swift-nio#2637). Each is kept here from its creation until ``serve(_:)`` takes it,
    /// so one never taken is never deallocated (a few objects, only when a server stops as
    /// connections arrive; its socket closes with the peer's).
    private static let untaken = Mutex<[ObjectIdentifier: NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>]>([:])

    private static func keep(_ connection: NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>) {
        untaken.withLock { $0[ObjectIdentifier(connection.channel)] = connection }
    }

    private static func take(_ connection: NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>) {
        _ = untaken.withLock { $0.removeValue(forKey: ObjectIdentifier(connection.channel)) }
    }

    private func serve(_ connection: NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>) async {
        Self.take(connection)
        do {
            try await connection.executeThenClose { inbound, outbound in
                var head: HTTPRequestHead?
                var body = ByteBuffer()
                for try await part in inbound {
                    switch part {
                    case .head(let requestHead):
                        head = requestHead
                        body.clear()
                    case .body(var chunk):
                        body.writeBuffer(&chunk)
                    case .end:
                        guard let requestHead = head else { continue }
                        var request = Self.request(requestHead, body: body)
                        request.connectionClosed = connection.channel.closeFuture
                        let response = await handler(request)
                        switch response.delivery {
                        case .drop:
                            return
                        case .truncate:
                            var headers = response.headers
                            headers.replaceOrAdd(name: "Content-Length", value: String(response.body.readableBytes))
                            try await outbound.write(.head(HTTPResponseHead(version: requestHead.version, status: response.status, headers: headers)))
                            let partial =
                                response.body.getSlice(at: response.body.readerIndex, length: response.body.readableBytes / 2) ?? ByteBuffer()
                            try await outbound.write(.body(.byteBuffer(partial)))
                            return
                        case .normal:
                            var headers = response.headers
                            headers.replaceOrAdd(name: "Content-Length", value: String(response.body.readableBytes))
                            let keepAlive = requestHead.isKeepAlive
                            if !keepAlive { headers.replaceOrAdd(name: "Connection", value: "close") }
                            try await outbound.write(.head(HTTPResponseHead(version: requestHead.version, status: response.status, headers: headers)))
                            try await outbound.write(.body(.byteBuffer(response.body)))
                            try await outbound.write(.end(nil))
                            if !keepAlive { return }
                        }
                        head = nil
                    }
                }
            }
        } catch {
            // A client that goes away mid-request is normal for a test server.
        }
    }

    static func request(_ head: HTTPRequestHead, body: ByteBuffer) -> MockHTTPRequest {
        let uri = head.uri
        let path: String
        var query: [(name: String, value: String)] = []
        if let mark = uri.firstIndex(of: "?") {
            path = String(uri[..<mark])
            for pair in uri[uri.index(after: mark)...].split(separator: "&") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                let name = String(parts[0]).removingPercentEncoding ?? String(parts[0])
                let value =
                    parts.count > 1 ? (String(parts[1]).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(parts[1])) : ""
                query.append((name, value))
            }
        } else {
            path = uri
        }
        return MockHTTPRequest(
            method: head.method, path: path, query: query, headers: head.headers, body: body,
            arrivedAt: Int64(Date().timeIntervalSince1970 * 1000))
    }
}
