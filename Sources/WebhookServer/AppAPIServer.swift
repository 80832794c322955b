import AppStoreServer
import Foundation
package import Hummingbird
package import Logging
import NIOFoundationCompat
package import Reconciler
import ReconcilerDomain
package import ReconcilerMetrics
package import ReconcilerShared
package import ReconcilerStore
import ServiceLifecycle

/// The app API: where the app's own backend asks for its customers' purchases, on a port of its
/// own (it is not the URL Apple calls), off unless `appApi` is configured. Every request needs
/// `Authorization: Bearer <a token of appApi.tokenFile>` (``AppAPITokens``); without one it gets
/// 401 with `WWW-Authenticate: Bearer`, an error body and no data, and counts in
/// `reconciler_app_api_unauthorized_total`.
///
/// - `GET /v1/purchases?bundleId=B&environment=production|sandbox&KEY=V` (KEY one of
///   `originalTransactionId`, `transactionId`, `appAccountToken`, `appUserId`: ``PurchaseQuery``):
///   200 `{"purchases": [...]}`, each an `export` line with `checkedAt` and `fresh`
///   (``AppPurchase``); no match is an empty list.
/// - `POST /v1/transactions` with `{"signedTransaction": JWS}` (StoreKit's): verified, routed by
///   its signed app and environment, applied as a snapshot (``HandedOverTransaction``): 200
///   `{"purchase": ...}`; a forgery or malformed value 400 with the verifier's reason or
///   `MALFORMED_BODY`, nothing written.
/// - `GET /v1/openapi.json`: the OpenAPI 3.1 document of these endpoints (``AppAPIDocument``).
///
/// Errors are the webhook's shape, `{"error": CODE, "detail": TEXT}`, with the status the code
/// says (``ReconcilerError/Code/httpStatus``): 400 `INVALID_QUERY`,
/// 401 `UNAUTHORIZED`, 503 `APP_NOT_CONFIGURED` for an app or environment the configuration does
/// not name, 503 `STORE_UNAVAILABLE` when the database fails.
///
/// ```swift
/// let api = AppAPIServer(configuration: .init(port: 8081), tokens: tokens, handlers: handlers, metrics: registry, logger: logger)
/// let services: [any Service] = [database, api.makeApplication()]   // beside the webhook, in serve's group
/// ```
package struct AppAPIServer: Sendable {
    package struct Configuration: Sendable {
        package var host: String
        package var port: Int
        /// The present `entitled` is judged at (tests move it).
        package var now: @Sendable () -> Timestamp

        package init(host: String = "0.0.0.0", port: Int = 8081, now: @escaping @Sendable () -> Timestamp = { .now }) {
            self.host = host
            self.port = port
            self.now = now
        }
    }

    package let configuration: Configuration
    let tokens: AppAPITokens
    /// Each configured app and environment's handler: its scope (the rule for `entitled`), its
    /// verifier and its database.
    let handlers: [NotificationHandler]
    /// Each app and environment with an In-App Purchase key: its refreshes and consumption answers
    /// (an app without one answers refreshes with the stored state, `fresh: false`).
    let refreshers: [AppRefresher]
    let database: Database
    let metrics: AppAPIMetrics
    let logger: Logger

    package init(
        configuration: Configuration, tokens: AppAPITokens, handlers: [NotificationHandler], refreshers: [AppRefresher] = [],
        database: Database, metrics: MetricsRegistry, logger: Logger
    ) {
        self.configuration = configuration
        self.tokens = tokens
        self.handlers = handlers
        self.refreshers = refreshers
        self.database = database
        self.metrics = AppAPIMetrics(registry: metrics)
        self.logger = logger
    }

    /// The Hummingbird application: a `Service` for `serve`'s group, which shuts it down
    /// gracefully with the rest. `onServerRunning` receives the bound port (useful with port 0).
    package func makeApplication(onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }) -> some ApplicationProtocol {
        let router = Router()
        router.get("v1/purchases") { request, _ in
            await answer(request) { try await purchases(request) }
        }
        router.post("v1/transactions") { request, _ in
            await answer(request) { try await handOver(request) }
        }
        router.post("v1/consumption/:transactionId") { request, context in
            await answer(request) { try await consumption(request, transactionId: context.parameters.get("transactionId") ?? "") }
        }
        router.get("v1/openapi.json") { request, _ in
            await answer(request) { Self.json(.ok, AppAPIDocument.json) }
        }
        return Application(
            router: router,
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "app-store-reconciler-app-api"),
            onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? 0) },
            logger: logger)
    }

    /// Runs `body` for an authenticated request; every failure becomes its error answer.
    private func answer(_ request: Request, _ body: () async throws -> Response) async -> Response {
        guard tokens.accepts(authorization: request.headers[.authorization]) else {
            metrics.unauthorized()
            // Neither the header nor the query (customer keys) is logged.
            logger.warning(
                "app API request without a listed bearer token (401)",
                metadata: ["path": "\(request.uri.path)", "authorization": "\(request.headers[.authorization] == nil ? "missing" : "not listed")"])
            var response = Self.response(
                failure: ReconcilerError(.unauthorized, "send Authorization: Bearer <token>, a token listed in appApi.tokenFile"))
            response.headers[.wwwAuthenticate] = "Bearer"
            return response
        }
        do {
            return try await body()
        } catch {
            let response = Self.response(failure: error)
            // The database's failures are the operator's to see; a refused request is the caller's.
            if WebhookAnswer(failure: error).error == "STORE_UNAVAILABLE" {
                logger.error(
                    "app API request failed", metadata: ["path": "\(request.uri.path)", "error": "\(Database.operatorDescription(of: error))"])
            } else {
                logger.debug("app API request refused", metadata: ["path": "\(request.uri.path)", "status": "\(response.status.code)"])
            }
            return response
        }
    }

    private func purchases(_ request: Request) async throws -> Response {
        let query = try PurchaseQuery(parameters: request.uri.queryParameters.map { (String($0.key), String($0.value)) })
        let handler = try handler(of: query.target)
        let purchases: [AppPurchase]
        if query.refresh != nil, let refresher = refresher(of: query.target) {
            purchases = try await refresher.purchases(query, at: configuration.now)
        } else {
            // Without an In-App Purchase key for the app, nothing can ask Apple: the stored state, `fresh: false`.
            purchases = try await AppPurchases(scope: handler.scope, database: database).stored(query.key, at: configuration.now())
        }
        let rows = try purchases.map { try $0.jsonObject() }
        return Self.json(.ok, "{\"purchases\":[" + rows.joined(separator: ",") + "]}")
    }

    /// `POST /v1/transactions`: a signed transaction the app got from StoreKit, verified, routed by
    /// its signed app and environment, applied as a snapshot (``HandedOverTransaction``).
    private func handOver(_ request: Request) async throws -> Response {
        let malformed = ReconcilerError(.malformedBody, "expected a JSON object {\"signedTransaction\": \"<JWS>\"}")
        guard (request.headers[.contentLength].flatMap(Int.init) ?? 0) <= Self.maximumBodySize,
            let body = try? await request.body.collect(upTo: Self.maximumBodySize)
        else {
            throw ReconcilerError(.bodyTooLarge, "the body exceeds \(Self.maximumBodySize) bytes")
        }
        guard let posted = try? JSONDecoder().decode(PostedTransaction.self, from: Data(buffer: body)), !posted.signedTransaction.isEmpty else {
            throw malformed
        }
        let handedOver = try await HandedOverTransaction.verify(posted.signedTransaction, handlers: handlers)
        let purchase = try await handedOver.apply(at: configuration.now())
        let target = handedOver.handler.scope.target
        logger.info(
            "app handed over a transaction",
            metadata: [
                "bundleId": "\(target.bundleId)", "environment": "\(target.environment.rawValue)",
                "originalTransactionId": "\(purchase.state.originalTransactionId)",
            ])
        return Self.json(.ok, "{\"purchase\":" + (try purchase.jsonObject()) + "}")
    }

    /// `POST /v1/consumption/{transactionId}?bundleId=B&environment=E` with `consumption send`'s
    /// fields as JSON: the app's answer to its consumption request, sent at once (``ConsumptionAppAnswer``):
    /// 202 accepted, 400 refused (with Apple's code when Apple refused), 404 no such request, 409
    /// answered already, 503 Apple unreachable (retry) or no In-App Purchase key for the app.
    private func consumption(_ request: Request, transactionId: String) async throws -> Response {
        let target = try PurchaseQuery.app(of: request.uri.queryParameters.map { (String($0.key), String($0.value)) })
        _ = try handler(of: target)
        guard (request.headers[.contentLength].flatMap(Int.init) ?? 0) <= Self.maximumBodySize,
            let body = try? await request.body.collect(upTo: Self.maximumBodySize)
        else {
            throw ReconcilerError(.bodyTooLarge, "the body exceeds \(Self.maximumBodySize) bytes")
        }
        guard let posted = try? JSONDecoder().decode(PostedConsumption.self, from: Data(buffer: body)) else {
            throw ReconcilerError(
                .malformedBody,
                "expected a JSON object {\"customerConsented\": true, \"deliveryStatus\": \"DELIVERED\", \"sampleContentProvided\": false, "
                    + "\"refundPreference\": \"DECLINE\" (optional), \"consumptionPercentage\": 25000 (optional)}")
        }
        guard let refresher = refresher(of: target) else {
            return Self.consumptionAnswer(
                503, error: "NO_API_KEY", detail: "\(target.description) has no In-App Purchase key configured: the answer cannot be sent to Apple")
        }
        let input = ConsumptionAnswers.Input(
            transactionId: transactionId, customerConsented: posted.customerConsented, deliveryStatus: posted.deliveryStatus,
            sampleContentProvided: posted.sampleContentProvided ? "true" : "false", refundPreference: posted.refundPreference,
            consumptionPercentage: posted.consumptionPercentage)
        let answer = await refresher.answerConsumption(input)
        logger.info(
            "app answered a consumption request",
            metadata: [
                "bundleId": "\(target.bundleId)", "environment": "\(target.environment.rawValue)", "transactionId": "\(transactionId)",
                "status": "\(answer.httpStatus)",
            ])
        switch answer {
        case .accepted:
            return Self.json(.accepted, "{\"answeredBy\":\"app\",\"transactionId\":" + Self.jsonString(transactionId) + "}")
        case .refused(let code, let detail): return Self.consumptionAnswer(400, error: "CONSUMPTION_REFUSED", detail: detail, appleErrorCode: code)
        case .alreadyAnswered(let detail): return Self.consumptionAnswer(409, error: "CONSUMPTION_ALREADY_ANSWERED", detail: detail)
        case .unknownRequest(let detail): return Self.consumptionAnswer(404, error: "UNKNOWN_CONSUMPTION_REQUEST", detail: detail)
        case .unreachable(let detail): return Self.consumptionAnswer(503, error: "APPLE_UNREACHABLE", detail: detail)
        }
    }

    private struct PostedConsumption: Decodable {
        var customerConsented: Bool
        var deliveryStatus: String
        var sampleContentProvided: Bool
        var refundPreference: String?
        var consumptionPercentage: Int?
    }

    /// A consumption answer's error body: `{"error", "detail"}`, with `appleErrorCode` when Apple refused.
    static func consumptionAnswer(_ status: Int, error: String, detail: String, appleErrorCode: Int64? = nil) -> Response {
        var fields = ["\"detail\":" + jsonString(detail), "\"error\":" + jsonString(error)]
        if let appleErrorCode { fields.insert("\"appleErrorCode\":\(appleErrorCode)", at: 0) }
        return json(HTTPResponse.Status(code: status), "{" + fields.joined(separator: ",") + "}")
    }

    static func jsonString(_ text: String) -> String {
        String(decoding: (try? JSONSerialization.data(withJSONObject: text, options: .fragmentsAllowed)) ?? Data("\"\"".utf8), as: UTF8.self)
    }

    /// The refresher of an app and environment, when it has an In-App Purchase key.
    private func refresher(of target: AppTarget) -> AppRefresher? {
        refreshers.first { $0.scope.target.bundleId == target.bundleId && $0.scope.target.environment == target.environment }
    }

    /// A signed transaction is a few KB; StoreKit's JWS with its chain stays well under this.
    static let maximumBodySize = 64 * 1024

    private struct PostedTransaction: Decodable {
        var signedTransaction: String
    }

    /// The handler of the app and environment a request names; 503 `APP_NOT_CONFIGURED` when none.
    private func handler(of target: AppTarget) throws -> NotificationHandler {
        guard
            let handler = handlers.first(where: { $0.scope.target.bundleId == target.bundleId && $0.scope.target.environment == target.environment })
        else {
            throw ReconcilerError(.appNotConfigured, "\(target.description) is not configured in this deployment")
        }
        return handler
    }

    /// An error's answer, as the webhook's: the status its code says, `{"error", "detail"}`.
    static func response(failure error: any Error) -> Response {
        var answer = WebhookAnswer(failure: error)
        if answer.status >= 500, answer.error == "STORE_UNAVAILABLE" { answer.detail = "the database is unavailable; retry later" }
        return WebhookServer.response(answer)
    }

    static func json(_ status: HTTPResponse.Status, _ body: String) -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: body)))
    }
}
