import AppStoreServer
import Foundation
import Hummingbird
import Logging
import PostgresNIO
import Reconciler
import ReconcilerMetrics
import ServiceLifecycle

/// The live endpoint App Store Server Notifications V2 are delivered to.
///
/// - `POST /notifications` takes Apple's `{"signedPayload": "..."}` and runs the
///   ``NotificationHandler``: 200 when the notification is stored (also for a duplicate), 400
///   with the rejection reason when it fails verification (nothing is written), 413 when the
///   body is larger than the limit, 503 when the database fails (Apple then retries).
/// - `GET /health` answers 200 when the database is reachable, 503 otherwise.
/// - `GET /metrics` serves the process's ``MetricsRegistry`` in Prometheus text format: what
///   ``WebhookMetrics`` counts, and whatever else the process put in that registry (the ledger
///   gauges of ``LedgerMetrics``).
///
/// ```swift
/// let server = WebhookServer(configuration: .init(port: 8080), handler: handler, logger: logger)
/// let app = server.makeApplication(services: [postgresClient])
/// try await app.runService()   // graceful shutdown on SIGTERM and SIGINT
/// ```
public struct WebhookServer: Sendable {
    public struct Configuration: Sendable {
        public var host: String
        public var port: Int
        /// Larger bodies get 413 without being read; Apple's notifications are a few tens of KB.
        public var maximumBodySize: Int
        /// The app's own webhook: every notification stored for the first time is queued for it,
        /// in the same transaction (`serve --forward-to`); a forwarder service delivers the queue.
        public var forwardTo: ForwardingTarget?

        public init(host: String = "0.0.0.0", port: Int = 8080, maximumBodySize: Int = 256 * 1024, forwardTo: ForwardingTarget? = nil) {
            self.host = host
            self.port = port
            self.maximumBodySize = maximumBodySize
            self.forwardTo = forwardTo
        }
    }

    public let configuration: Configuration
    public let handler: NotificationHandler
    public let metrics: WebhookMetrics
    let logger: Logger

    /// Without `metrics`, the server counts into a registry of its own, labelled with the handler's app and environment.
    public init(configuration: Configuration, handler: NotificationHandler, metrics: WebhookMetrics? = nil, logger: Logger) {
        self.configuration = configuration
        self.handler = handler
        self.metrics =
            metrics
            ?? WebhookMetrics(
                registry: MetricsRegistry(
                    environment: handler.verifier.configuration.environment.rawValue, bundleId: handler.verifier.configuration.bundleId))
        self.logger = logger
    }

    /// The Hummingbird application; `onServerRunning` receives the bound port (useful with port 0).
    public func makeApplication(
        services: [any Service] = [], onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> some ApplicationProtocol {
        let router = Router()
        router.post("notifications") { request, context in
            try await receive(request, context: context)
        }
        router.get("health") { _, _ in
            try await health()
        }
        router.get("metrics") { _, _ in
            Response(
                status: .ok, headers: [.contentType: MetricsRegistry.contentType],
                body: .init(byteBuffer: ByteBuffer(string: metrics.registry.exposition())))
        }
        return Application(
            router: router,
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "app-store-reconciler"),
            services: services,
            onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? 0) },
            logger: logger)
    }

    private func receive(_ request: Request, context: some RequestContext) async throws -> Response {
        // Refuse by the declared length without reading; a chunked body is cut at the limit.
        let declaredLength = request.headers[.contentLength].flatMap(Int.init)
        guard (declaredLength ?? 0) <= configuration.maximumBodySize,
            let body = try? await request.body.collect(upTo: configuration.maximumBodySize)
        else {
            metrics.rejected(reason: "BODY_TOO_LARGE")
            logger.warning(
                "notification rejected", metadata: ["reason": "BODY_TOO_LARGE", "bytes": "\(declaredLength.map(String.init) ?? "over the limit")"])
            return Self.json(.contentTooLarge, ["error": "BODY_TOO_LARGE", "detail": "the body exceeds \(configuration.maximumBodySize) bytes"])
        }
        guard let envelope = try? JSONDecoder().decode(ResponseBodyV2.self, from: Data(buffer: body)),
            let signedPayload = envelope.signedPayload, !signedPayload.isEmpty
        else {
            metrics.rejected(reason: "MALFORMED_BODY")
            logger.warning("notification rejected", metadata: ["reason": "MALFORMED_BODY", "bytes": "\(body.readableBytes)"])
            return Self.json(.badRequest, ["error": "MALFORMED_BODY", "detail": "expected a JSON object {\"signedPayload\": \"<JWS>\"}"])
        }
        let result: HandlingResult
        do {
            result = try await handler.handle(
                signedPayload: signedPayload, source: .webhook, forwarding: configuration.forwardTo.map { .init(target: $0) })
        } catch let error as VerificationError {
            metrics.rejected(reason: error.reason.rawValue)
            logger.warning("notification rejected", metadata: ["reason": "\(error.reason.rawValue)", "detail": "\(error.detail)"])
            return Self.json(.badRequest, ["error": error.reason.rawValue, "detail": error.detail])
        } catch {
            metrics.storeFailed()
            let description = (error as? PSQLError)?.briefDescription ?? String(describing: type(of: error))
            logger.error("notification not stored", metadata: ["error": "\(description)"])
            return Self.json(.serviceUnavailable, ["error": "STORE_UNAVAILABLE", "detail": "the notification was not stored; retry later"])
        }
        metrics.stored(result)
        logger.info(
            "notification",
            metadata: [
                "notificationUUID": "\(result.notificationUUID)", "type": "\(result.typeAndSubtype)",
                "outcome": "\(result.outcome.rawValue)", "originalTransactionId": "\(result.originalTransactionId ?? "-")",
                "changed": "\(result.change?.isChange ?? false)",
            ])
        return Self.json(.ok, ["outcome": result.outcome.rawValue, "notificationUUID": result.notificationUUID])
    }

    private func health() async throws -> Response {
        guard await handler.isStoreReachable() else { return Self.json(.serviceUnavailable, ["status": "database unreachable"]) }
        return Self.json(.ok, ["status": "ok"])
    }

    static func json(_ status: HTTPResponse.Status, _ object: [String: String]) -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let data = (try? encoder.encode(object)) ?? Data("{}".utf8)
        return Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(data: data)))
    }
}
