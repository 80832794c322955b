import AppStoreServer
import Crypto
import Foundation
import Logging
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import ServiceLifecycle
import Synchronization

/// The app's own notification handler, imitated: where `reconciler run` and `serve` forward (an
/// app's `forwardTo`, or `--forward-to`) in tests and in the demo. It takes `POST` bodies of Apple's form
/// (`{"signedPayload": "..."}`) on any path and counts, per notificationUUID (read from the JWS
/// payload without verifying it, as a handler would after its own verification), how many times it
/// acknowledged each one. With a secret it checks the `Reconciler-Signature` header on its own
/// (HMAC-SHA256 of `"<t>.<body>"`) and refuses a delivery without a valid one (401).
///
/// - `GET /receiver/stats`: ``Statistics`` as JSON;
/// - `POST /receiver/behaviour`: `{"status": 500, "delayMilliseconds": 200}` answers every
///   delivery with that status after that delay, until changed back (`{"status": 200}`).
///
/// ```swift
/// let receiver = AppWebhookReceiver(configuration: .init(port: 0, secret: "s3cret"))
/// try await receiver.run { port in print("http://127.0.0.1:\(port)/notifications") }
/// ```
package final class AppWebhookReceiver: Service, Sendable {
    package struct Configuration: Sendable {
        package var host: String
        /// 0 picks a free port (passed to `onBound`).
        package var port: Int
        /// The shared secret of `Reconciler-Signature` (`nil`: no check).
        package var secret: String?
        /// Answer the first this many deliveries with 500, as an app that is down for a while.
        package var failFirst: Int
        /// Added before every answer.
        package var delayMilliseconds: Int

        package init(host: String = "127.0.0.1", port: Int = 0, secret: String? = nil, failFirst: Int = 0, delayMilliseconds: Int = 0) {
            self.host = host
            self.port = port
            self.secret = secret
            self.failFirst = failFirst
            self.delayMilliseconds = delayMilliseconds
        }
    }

    /// What the receiver saw.
    package struct Statistics: Sendable, Codable, Hashable {
        /// Deliveries received (any answer).
        package var received = 0
        /// Deliveries answered 2xx, by notificationUUID.
        package var acknowledged: [String: Int] = [:]
        /// Acknowledged deliveries by notificationType.
        package var notificationTypes: [String: Int] = [:]
        /// Deliveries answered with a failure (the behaviour, or --fail-first).
        package var failed = 0
        /// Deliveries refused for a missing or wrong signature.
        package var badSignatures = 0
        /// Bodies that are not `{"signedPayload": "<JWS>"}`.
        package var malformed = 0
        /// Deliveries received and not answered yet.
        package var inFlight = 0
        /// Deliveries received and not answered yet, by notificationUUID.
        package var inFlightByNotification: [String: Int] = [:]
        /// The notifications a delivery of which arrived while an earlier delivery of the same one
        /// was still unanswered (and its sender still waiting for the answer): sent twice at once.
        package var deliveredTwiceAtOnce: Set<String> = []
        /// Held deliveries whose sender closed the connection before the answer.
        package var abandoned = 0
        /// The notificationUUID of every delivery received, in the order they arrived (a repeated
        /// delivery appears again): what the app heard first.
        package var arrivals: [String] = []
        /// The SHA-256 (hex) of the `signedPayload` each acknowledged delivery carried, by notificationUUID
        /// (the last one), to compare with what the App Store signed.
        package var signedPayloadSHA256: [String: String] = [:]
        /// Acknowledged deliveries whose body was not exactly Apple's `{"signedPayload":"<JWS>"}`.
        package var notApplesBody = 0
        /// Acknowledged deliveries with the header `Reconciler-Redelivery: 1`, by notificationUUID.
        package var redelivered: [String: Int] = [:]

        package init() {}
    }

    /// How the receiver answers now.
    package struct Behaviour: Sendable, Codable, Hashable {
        package var status: Int
        package var delayMilliseconds: Int?

        package init(status: Int, delayMilliseconds: Int? = nil) {
            self.status = status
            self.delayMilliseconds = delayMilliseconds
        }
    }

    package let configuration: Configuration
    private let state: Mutex<(statistics: Statistics, behaviour: Behaviour, failuresLeft: Int)>
    /// While set, deliveries wait here (``hold()``) until ``release()``, or until their sender goes away.
    private let held = Mutex<(holding: Bool, waiting: [UUID: CheckedContinuation<Bool, Never>])>((false, [:]))
    private let onBound: @Sendable (Int) async throws -> Void

    package init(configuration: Configuration, onBound: @escaping @Sendable (Int) async throws -> Void = { _ in }) {
        self.configuration = configuration
        self.onBound = onBound
        state = Mutex((Statistics(), Behaviour(status: 200, delayMilliseconds: configuration.delayMilliseconds), configuration.failFirst))
    }

    package var statistics: Statistics { state.withLock { $0.statistics } }

    package func setBehaviour(_ behaviour: Behaviour) { state.withLock { $0.behaviour = behaviour } }

    /// From now on, every delivery waits unanswered (counted in flight) until ``release()``: an
    /// app that takes as long as a test needs, with no clock involved.
    package func hold() { held.withLock { $0.holding = true } }

    /// Answers every delivery held so far, and stops holding new ones.
    package func release() {
        let waiting = held.withLock { held in
            held.holding = false
            defer { held.waiting = [:] }
            return held.waiting.values
        }
        for waiter in waiting { waiter.resume(returning: true) }
    }

    /// Waits while deliveries are held; `false` when the sender closed the connection meanwhile
    /// (it no longer waits for an answer: the delivery is no longer in flight).
    private func waitIfHeld(closed: EventLoopFuture<Void>?) async -> Bool {
        let id = UUID()
        return await withCheckedContinuation { continuation in
            let holding = held.withLock { held in
                if held.holding { held.waiting[id] = continuation }
                return held.holding
            }
            guard holding else { return continuation.resume(returning: true) }
            closed?.whenComplete { [self] _ in
                held.withLock { $0.waiting.removeValue(forKey: id) }?.resume(returning: false)
            }
        }
    }

    /// Serves until cancelled (or a graceful shutdown).
    package func run() async throws {
        try await cancelWhenGracefulShutdown { try await self.run(onBound: self.onBound) }
    }

    package func run(onBound: @Sendable (Int) async throws -> Void) async throws {
        let server = MockHTTPServer(host: configuration.host, port: configuration.port) { [self] request in await answer(request) }
        // Held deliveries are answered when the receiver stops, so its connections can close.
        try await withTaskCancellationHandler {
            try await server.run(onBound: onBound)
        } onCancel: {
            release()
        }
    }

    func answer(_ request: MockHTTPRequest) async -> MockHTTPResponse {
        switch (request.method, request.path) {
        case (.GET, "/receiver/stats"):
            return .json(.ok, statistics)
        case (.POST, "/receiver/behaviour"):
            guard let behaviour = try? JSONDecoder().decode(Behaviour.self, from: Data(buffer: request.body)) else {
                return .text(.badRequest, "expected {\"status\": 200, \"delayMilliseconds\": 0}")
            }
            setBehaviour(behaviour)
            return .json(.ok, behaviour)
        case (.POST, _):
            return await receive(request)
        default:
            return .text(.notFound, "Not Found")
        }
    }

    private func receive(_ request: MockHTTPRequest) async -> MockHTTPResponse {
        let body = Data(buffer: request.body)
        let uuid = Self.notification(in: body)?.uuid
        let behaviour = state.withLock { state -> Behaviour in
            state.statistics.received += 1
            state.statistics.inFlight += 1
            if let uuid {
                state.statistics.arrivals.append(uuid)
                if state.statistics.inFlightByNotification[uuid, default: 0] > 0 { state.statistics.deliveredTwiceAtOnce.insert(uuid) }
                state.statistics.inFlightByNotification[uuid, default: 0] += 1
            }
            return state.behaviour
        }
        defer {
            state.withLock { state in
                state.statistics.inFlight -= 1
                if let uuid {
                    state.statistics.inFlightByNotification[uuid, default: 1] -= 1
                    if state.statistics.inFlightByNotification[uuid] == 0 { state.statistics.inFlightByNotification[uuid] = nil }
                }
            }
        }
        guard await waitIfHeld(closed: request.connectionClosed) else {
            state.withLock { $0.statistics.abandoned += 1 }
            return MockHTTPResponse(status: .serviceUnavailable, delivery: .drop)
        }
        if let delay = behaviour.delayMilliseconds, delay > 0 { try? await Task.sleep(for: .milliseconds(delay)) }
        if let secret = configuration.secret,
            !Self.isSigned(body: body, header: request.headers.first(name: "Reconciler-Signature"), secret: secret)
        {
            state.withLock { $0.statistics.badSignatures += 1 }
            return .text(.unauthorized, "bad signature")
        }
        guard let notification = Self.notification(in: body) else {
            state.withLock { $0.statistics.malformed += 1 }
            return .text(.badRequest, "expected {\"signedPayload\": \"<JWS>\"}")
        }
        let status = state.withLock { state -> Int in
            if state.failuresLeft > 0 {
                state.failuresLeft -= 1
                state.statistics.failed += 1
                return 500
            }
            guard (200..<300).contains(behaviour.status) else {
                state.statistics.failed += 1
                return behaviour.status
            }
            state.statistics.acknowledged[notification.uuid, default: 0] += 1
            state.statistics.notificationTypes[notification.type, default: 0] += 1
            state.statistics.signedPayloadSHA256[notification.uuid] = SHA256.hash(data: Data(notification.jws.utf8)).map {
                String(format: "%02x", $0)
            }
            .joined()
            if body != Data("{\"signedPayload\":\"\(notification.jws)\"}".utf8) { state.statistics.notApplesBody += 1 }
            if request.headers.first(name: "Reconciler-Redelivery") == "1" { state.statistics.redelivered[notification.uuid, default: 0] += 1 }
            return behaviour.status
        }
        return .text(HTTPResponseStatus(statusCode: status), (200..<300).contains(status) ? "ok" : "unavailable")
    }

    /// The notificationUUID and type of a body, read from the JWS payload.
    static func notification(in body: Data) -> (uuid: String, type: String, jws: String)? {
        guard let envelope = try? JSONSerialization.jsonObject(with: body) as? [String: Any], let jws = envelope["signedPayload"] as? String
        else { return nil }
        let parts = jws.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let payload = Base64URL.decode(parts[1].utf8).map({ Data($0) }),
            let claims = try? JSONSerialization.jsonObject(with: payload) as? [String: Any], let uuid = claims["notificationUUID"] as? String
        else { return nil }
        return (uuid, claims["notificationType"] as? String ?? "?", jws)
    }

    /// Checks `t=<seconds>,v1=<hex>` against HMAC-SHA256(secret, "<t>.<body>"), within five minutes of now.
    static func isSigned(body: Data, header: String?, secret: String) -> Bool {
        guard let header else { return false }
        var fields: [String: String] = [:]
        for part in header.split(separator: ",") {
            let pair = part.split(separator: "=", maxSplits: 1)
            if pair.count == 2 { fields[String(pair[0]).trimmingCharacters(in: .whitespaces)] = String(pair[1]) }
        }
        guard let timestamp = fields["t"], let seconds = Int64(timestamp), let signature = fields["v1"],
            abs(Int64(Date().timeIntervalSince1970) - seconds) <= 300
        else { return false }
        var message = Data(timestamp.utf8)
        message.append(UInt8(ascii: "."))
        message.append(body)
        let expected = Data(HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: Data(secret.utf8))))
        guard let given = Data(hex: signature), given.count == expected.count else { return false }
        return zip(given, expected).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }
}

extension Data {
    fileprivate init?(hex: String) {
        guard hex.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            guard let byte = UInt8(hex[index..<next], radix: 16) else { return nil }
            bytes.append(byte)
            index = next
        }
        self.init(bytes)
    }
}
