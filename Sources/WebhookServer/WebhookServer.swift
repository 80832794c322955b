package import AppStoreServer
import Foundation
package import Hummingbird
package import Logging
import NIOFoundationCompat
package import Reconciler
package import ReconcilerDomain
package import ReconcilerMetrics
package import ReconcilerShared
import ReconcilerStore
package import ServiceLifecycle

/// The live endpoint App Store Server Notifications V2 are delivered to, for every app and
/// environment the deployment serves (Apple sends sandbox notifications to the production URL
/// when no sandbox URL is set).
///
/// - `POST /notifications` takes Apple's `{"signedPayload": "..."}`, verifies its signature and
///   chain, and runs the ``NotificationHandler`` of the app and environment it names (a
///   ``NotificationRouter``), with the notifications that arrived with it in one transaction
///   (``NotificationBatcher``): 200 when the notification is stored (also for a duplicate), 200
///   `quarantined` when its signature and chain verify but it does not decode (its exact bytes
///   are quarantined for `rejections --retry`: ``NotificationRouter/quarantine(signedPayload:failure:)``),
///   400 with the rejection reason when it fails verification (nothing is written), 503
///   `APP_NOT_CONFIGURED` for an authentic notification of an app or environment the
///   configuration does not name (not stored; Apple delivers it again once it does), 400
///   `NOTIFICATION_TOO_OLD` for one signed more than 7 days before ``Configuration/now`` (not
///   Apple's delivery: a copy posted again), 413 when the body is larger than the limit, 503
///   `STORE_UNAVAILABLE` when the database fails, `OVERLOADED` when too many notifications wait for
///   it, `STOPPING` during a shutdown (Apple then retries). Every answer but 200 comes from one
///   mapping (``WebhookAnswer``): the error's code says its status and the body's `error`.
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
package struct WebhookServer: Sendable {
    package struct Configuration: Sendable {
        package var host: String
        package var port: Int
        /// Larger bodies get 413 without being read; Apple's notifications are a few tens of KB.
        package var maximumBodySize: Int
        /// The app's own webhook: every notification stored for the first time is queued for it,
        /// in the same transaction (`serve --forward-to`); a forwarder service delivers the queue.
        package var forwardTo: ForwardingTarget?
        /// How notifications that arrive together share a transaction.
        package var batches: NotificationBatcher.Configuration
        /// The present, against which a notification of an app the deployment does not serve is
        /// judged too old to be Apple's delivery (tests move it).
        package var now: @Sendable () -> Timestamp

        package init(
            host: String = "0.0.0.0", port: Int = 8080, maximumBodySize: Int = 256 * 1024, forwardTo: ForwardingTarget? = nil,
            batches: NotificationBatcher.Configuration = .init(), now: @escaping @Sendable () -> Timestamp = { .now }
        ) {
            self.host = host
            self.port = port
            self.maximumBodySize = maximumBodySize
            self.forwardTo = forwardTo
            self.batches = batches
            self.now = now
        }
    }

    package let configuration: Configuration
    package let router: NotificationRouter
    /// Each app's own webhooks, where its notifications stored for the first time are queued (one
    /// row per webhook that takes the notification's type).
    let forwarding: [AppTarget: [ForwardingRoute]]
    /// What requests that name no app yet count into (a body that is not a notification, a forged one).
    package let metrics: WebhookMetrics
    /// The counters of each app and environment the router serves, made once: their store
    /// failures start at 0 with the server (so `increase()` sees the first), and a request only
    /// looks its app's up.
    private let appMetrics: [AppTarget: WebhookMetrics]
    let logger: Logger

    /// One app in one environment; without `metrics`, the server counts into a registry of its
    /// own, labelled with the handler's app and environment.
    package init(configuration: Configuration, handler: NotificationHandler, metrics: WebhookMetrics? = nil, logger: Logger) {
        self.init(
            configuration: configuration, router: try! NotificationRouter(handlers: [handler]),
            forwarding: configuration.forwardTo.map { [handler.verifier.configuration.target: [ForwardingRoute(target: $0)]] } ?? [:],
            metrics: metrics
                ?? WebhookMetrics(
                    registry: MetricsRegistry(app: handler.verifier.configuration.target)),
            logger: logger)
    }

    /// Every app and environment of `router`; `metrics` counts what names no app, and each app's
    /// counters go to its scope of the same registry (``MetricsRegistry/scoped(_:)``).
    package init(
        configuration: Configuration, router: NotificationRouter, forwarding: [AppTarget: [ForwardingRoute]] = [:], metrics: WebhookMetrics,
        logger: Logger
    ) {
        self.configuration = configuration
        self.router = router
        self.forwarding = forwarding
        self.metrics = metrics
        self.appMetrics = Dictionary(
            router.handlers.map { handler in
                let target = handler.verifier.configuration.target
                return (target, metrics.scoped(bundleId: target.bundleId, environment: target.environment))
            }, uniquingKeysWith: { first, _ in first })
        self.logger = logger
    }

    /// The counters of one app and environment.
    private func metrics(of bundleId: String?, _ environment: AppStoreEnvironment?) -> WebhookMetrics {
        metrics.scoped(bundleId: bundleId, environment: environment)
    }

    /// The Hummingbird application; `onServerRunning` receives the bound port (useful with port 0).
    /// `beforeServerStarts` runs once the services run and before the port opens (`serve` checks or
    /// migrates the schema there, with the database client already running). Each application has
    /// its own ``NotificationBatcher``, run after `services` (so it stops before them, once the
    /// server has answered every request in flight).
    package func makeApplication(
        services: [any Service] = [], onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in },
        beforeServerStarts: (@Sendable () async throws -> Void)? = nil
    ) -> some ApplicationProtocol {
        let batcher = NotificationBatcher(configuration: configuration.batches, logger: logger)
        let router = Router()
        router.post("notifications") { request, context in
            try await receive(request, context: context, batcher: batcher)
        }
        router.get("health") { _, _ in
            try await health()
        }
        router.get("metrics") { _, _ in
            Response(
                status: .ok, headers: [.contentType: MetricsRegistry.contentType],
                body: .init(byteBuffer: ByteBuffer(string: metrics.registry.exposition())))
        }
        var application = Application(
            router: router,
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "app-store-reconciler"),
            services: services + [batcher],
            onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? 0) },
            logger: logger)
        if let beforeServerStarts { application.beforeServerStarts(perform: beforeServerStarts) }
        return application
    }

    private func receive(_ request: Request, context: some RequestContext, batcher: NotificationBatcher) async throws -> Response {
        // Refuse by the declared length without reading; a chunked body is cut at the limit.
        let declaredLength = request.headers[.contentLength].flatMap(Int.init)
        guard (declaredLength ?? 0) <= configuration.maximumBodySize,
            let body = try? await request.body.collect(upTo: configuration.maximumBodySize)
        else {
            return answer(
                failure: ReconcilerError(.bodyTooLarge, "the body exceeds \(configuration.maximumBodySize) bytes"), metrics: metrics,
                metadata: ["bytes": "\(declaredLength.map(String.init) ?? "over the limit")"])
        }
        guard
            let signedPayload = Self.compactSignedPayload(body)
                ?? (try? JSONDecoder().decode(ResponseBodyV2.self, from: Data(buffer: body)))?.signedPayload,
            !signedPayload.isEmpty
        else {
            return answer(
                failure: ReconcilerError(.malformedBody, "expected a JSON object {\"signedPayload\": \"<JWS>\"}"), metrics: metrics,
                metadata: ["bytes": "\(body.readableBytes)"])
        }
        let handler: NotificationHandler
        let notification: VerifiedNotification
        do {
            switch try await router.route(signedPayload: signedPayload) {
            case .handler(let routed, let verified):
                (handler, notification) = (routed, verified)
            case .notConfigured(let app):
                return refuse(app)
            }
        } catch {
            if let undecodable = NotificationRouter.undecodable(error) {
                return await quarantine(signedPayload, failure: undecodable)
            }
            return answer(failure: error, metrics: metrics)
        }
        let target = handler.verifier.configuration.target
        let appMetrics = appMetrics[target] ?? metrics(of: target.bundleId, target.environment)
        let result: HandlingResult
        do {
            result = try await batcher.handle(notification, by: handler, forwarding: forwarding[target].map { .init(routes: $0) })
        } catch {
            return answer(failure: error, metrics: appMetrics)
        }
        appMetrics.stored(result)
        logger.info(
            "notification",
            metadata: [
                "bundleId": "\(target.bundleId)", "environment": "\(target.environment.rawValue)",
                "notificationUUID": "\(result.notificationUUID)", "type": "\(result.typeAndSubtype)",
                "outcome": "\(result.outcome.rawValue)", "originalTransactionId": "\(result.originalTransactionId ?? "-")",
                "changed": "\(result.change?.isChange ?? false)",
            ])
        return Self.json(.ok, ["outcome": result.outcome.rawValue, "notificationUUID": result.notificationUUID])
    }

    /// The answer to an authentic notification that does not decode: quarantined with its exact
    /// bytes and answered 200, since Apple may not retry a 4xx (and the sandbox never retries);
    /// counted under the app it names and logged as an error (a release does not understand
    /// what Apple sends: upgrade, then `reconciler rejections --retry`). 503 when it cannot be
    /// stored: Apple delivers it again.
    private func quarantine(_ signedPayload: String, failure: VerificationError) async -> Response {
        let quarantined: NotificationRouter.Quarantined
        do {
            quarantined = try await router.quarantine(signedPayload: signedPayload, failure: failure)
        } catch {
            return answer(failure: error, metrics: metrics, metadata: ["undecodable": "\(failure.reason.rawValue)"])
        }
        let rejection = quarantined.rejection
        metrics.scoped(bundleId: quarantined.bundleId, environment: quarantined.environment).quarantined(reason: failure.reason.rawValue)
        logger.error(
            "authentic notification this release cannot decode; quarantined (200): upgrade, then `reconciler rejections --retry`",
            metadata: [
                "bundleId": "\(quarantined.bundleId ?? "")", "environment": "\(quarantined.environment?.rawValue ?? "")",
                "notificationUUID": "\(rejection.notificationUUID ?? "-")", "type": "\(rejection.typeAndSubtype ?? "-")",
                "sha256": "\(rejection.payloadSHA256)", "reason": "\(failure.reason.rawValue)", "detail": "\(failure.detail)",
                "new": "\(quarantined.isNew)",
            ])
        var body = ["outcome": "quarantined", "payloadSHA256": rejection.payloadSHA256]
        body["notificationUUID"] = rejection.notificationUUID
        return Self.json(.ok, body)
    }

    /// The answer to an authentic notification of an app or environment the router does not serve:
    /// never 2xx, since nothing is stored. Genuine, so the app it names is real, but anyone can
    /// post a genuine notification of someone else's app (many are public) or request a TEST
    /// notification of their own: only an app the deployment knows is a configuration gap to page
    /// about, and a notification signed too long ago for Apple's retries is a copy posted again.
    private func refuse(_ app: NotificationRouter.UnconfiguredApp) -> Response {
        var metadata: Logger.Metadata = [
            "bundleId": "\(app.bundleId ?? "none")", "environment": "\(app.environment?.rawValue ?? "none")",
            "appAppleId": "\(app.appAppleId.map(String.init) ?? "none")", "signedDate": "\(app.signedDate?.description ?? "none")",
        ]
        switch app.sender(at: configuration.now()) {
        case .replay:
            metrics.replayed()
            logger.warning(
                "notification signed too long ago to be Apple's delivery, of an app or environment not served; not stored (400)", metadata: metadata)
            let age = NotificationRouter.maximumDeliveryAge.operatorText
            return Self.response(
                WebhookAnswer(
                    failure: ReconcilerError(
                        .notificationTooOld,
                        "\(app.description), signed more than \(age) ago: not Apple's delivery (Apple retries for about 157 hours); not stored")))
        case .someoneElse:
            metrics.foreignApp()
            metadata["type"] = "\(app.notificationType?.rawValue ?? "none")"
            logger.warning("notification of an app this deployment does not know, or a TEST notification; not stored (503)", metadata: metadata)
        case .appleForAKnownApp:
            // A configuration gap, not a forgery. Apple retries a 5xx.
            metrics(of: app.bundleId, app.environment).unconfiguredApp()
            logger.error(
                "notification for an app or environment that is not configured; not stored (503), Apple will deliver it again", metadata: metadata)
        }
        return Self.response(WebhookAnswer(failure: ReconcilerError(.appNotConfigured, app.description)))
    }

    /// Answers a notification the webhook did not store, through the one mapping (``WebhookAnswer``):
    /// a refusal (4xx) counts as a rejection with its reason, anything else as a store failure (503:
    /// Apple delivers it again).
    private func answer(failure error: any Error, metrics: WebhookMetrics, metadata: Logger.Metadata = [:]) -> Response {
        let answer = WebhookAnswer(failure: error)
        if answer.refusesTheNotification {
            metrics.rejected(reason: answer.error)
            logger.warning("notification rejected", metadata: metadata.merging(["reason": "\(answer.error)", "detail": "\(answer.detail)"]) { $1 })
        } else {
            metrics.storeFailed()
            logger.error(
                "notification not stored",
                metadata: metadata.merging(["answer": "\(answer.error)", "error": "\(Database.operatorDescription(of: error))"]) { $1 })
        }
        return Self.response(answer)
    }

    /// The HTTP answer: its status, and `{"error": ..., "detail": ...}`.
    static func response(_ answer: WebhookAnswer) -> Response {
        json(HTTPResponse.Status(code: answer.status), ["error": answer.error, "detail": answer.detail])
    }

    private func health() async throws -> Response {
        guard await router.handlers[0].isStoreReachable() else { return Self.json(.serviceUnavailable, ["status": "database unreachable"]) }
        return Self.json(.ok, ["status": "ok"])
    }

    static func json(_ status: HTTPResponse.Status, _ object: [String: String]) -> Response {
        // Keys sorted, so an answer reads the same every time.
        let members = object.keys.sorted().map { RowJSON.string($0) + ":" + RowJSON.string(object[$0] ?? "") }
        return Response(
            status: status, headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(string: "{" + members.joined(separator: ",") + "}")))
    }

    /// The `signedPayload` of a body in the compact form Apple sends, `{"signedPayload":"<JWS>"}`,
    /// read without a JSON decoder (Foundation's scanned, copied and checked the 18 KB string: 2%
    /// of `serve`'s CPU under the webhook bench); `nil` for any other form, which `JSONDecoder`
    /// reads as before: other spacing or members, escapes, control or non-ASCII bytes in the value.
    package static func compactSignedPayload(_ body: ByteBuffer) -> String? {
        body.withUnsafeReadableBytes { bytes -> String? in
            let prefix = #"{"signedPayload":""#.utf8
            guard bytes.count > prefix.count + 1, bytes.starts(with: prefix) else { return nil }
            var end = prefix.count
            // Eight bytes at a time while none needs a look (a JWS is 18 KB of plain ASCII), then byte by byte.
            while end + 8 <= bytes.count, Self.isPlainJSONText(bytes.loadUnaligned(fromByteOffset: end, as: UInt64.self)) {
                end += 8
            }
            while end < bytes.count {
                let byte = bytes[end]
                if byte == UInt8(ascii: "\"") { break }
                // What JSON escapes or may spell otherwise: left to the decoder.
                guard byte >= 0x20, byte < 0x80, byte != UInt8(ascii: "\\") else { return nil }
                end += 1
            }
            guard end < bytes.count, bytes[(end + 1)...].elementsEqual("}".utf8) else { return nil }
            return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[prefix.count..<end]), as: UTF8.self)
        }
    }

    /// Whether none of a word's eight bytes is a quote, a backslash, a control character or
    /// non-ASCII: the bytes JSON spells as themselves inside a string.
    @inline(__always)
    private static func isPlainJSONText(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highBits: UInt64 = 0x8080_8080_8080_8080
        // Some byte below n (n ≤ 0x80), and some byte zero: the word tricks of "Bit Twiddling Hacks".
        func hasByteBelow(_ word: UInt64, _ n: UInt64) -> Bool { (word &- ones &* n) & ~word & highBits != 0 }
        return word & highBits == 0 && !hasByteBelow(word, 0x20)
            && !hasByteBelow(word ^ (ones &* UInt64(UInt8(ascii: "\""))), 1)
            && !hasByteBelow(word ^ (ones &* UInt64(UInt8(ascii: "\\"))), 1)
    }
}
