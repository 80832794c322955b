import AppStoreServer
import Crypto
import Foundation
import NIOFoundationCompat
import NIOHTTP1
import Synchronization

/// The mock's own endpoints, on every base URL, covering every app and environment, never sabotaged:
/// - `GET /mock/truth[?at=UNIX_MS]`: the final state of every purchase as JSON lines (`reconciler
///   export`'s shape and order: by originalTransactionId, bundleId, environment), `entitled` as of
///   `at` (default now);
/// - `GET /mock/orders`: every transaction's order ID as JSON lines ({orderId, transactionId,
///   originalTransactionId, account, bundleId, environment, ...}), to pick one for Look Up Order ID;
/// - `GET /mock/identifiers[?bundleId=...]`: the IDs the app's own database holds for the customers
///   Apple's notification history no longer shows, as the CSV `reconciler import` reads
///   (`transactionId,appUserId`); from then on the truth carries their `appUserId`;
/// - `GET /mock/notifications`: every notification as JSON lines ({notificationUUID,
///   notificationType, subtype, signedDate, firstAttemptDate, delivered (a send attempt
///   succeeded), forged, bundleId, environment}) in Get Notification History's order, to know
///   which ones Apple failed to deliver and which ones a window holds;
/// - `GET /mock/consumption`: every answer to a consumption request it accepted (Send Consumption
///   Information), as JSON lines ({bundleId, environment, transactionId, customerConsented,
///   deliveryStatus, sampleContentProvided, refundPreference, consumptionPercentage, receivedAt});
/// - `GET /mock/stats`: what the mock saw (requests, busiest second, 429s, Retry-After violations,
///   faults injected, deliveries, cross-app requests), in total and per app and environment;
///   `POST /mock/stats/reset` clears it;
/// - `GET /mock/health`: 200 once serving;
/// - `GET /mock/faults`, `POST /mock/faults`: read or replace the fault configuration (all apps);
/// - `POST /mock/refund?transactionId=...[&bundleId=...][&environment=Production|Sandbox]`: refund
///   a transaction now in the app and environment that has it (a new transaction version and a
///   REFUND notification, delivered to the webhook); `bundleId` and `environment` choose when
///   several have it (`--shared-transaction-ids`).
extension MockAppStore {
    func admin(_ request: MockHTTPRequest) -> MockHTTPResponse {
        switch (request.method, request.path) {
        case (.GET, "/mock/truth"):
            let at = request.queryValue("at").flatMap { Int64($0) } ?? Self.nowMilliseconds
            guard let lines = try? truthJSONLines(at: at) else { return .text(.internalServerError, "truth unavailable") }
            return .text(.ok, lines, contentType: "application/x-ndjson")
        case (.GET, "/mock/orders"):
            guard let lines = try? ordersJSONLines() else { return .text(.internalServerError, "orders unavailable") }
            return .text(.ok, lines, contentType: "application/x-ndjson")
        case (.GET, "/mock/identifiers"):
            return .text(.ok, identifiersCSV(bundleId: request.queryValue("bundleId")), contentType: "text/csv")
        case (.GET, "/mock/notifications"):
            return .text(.ok, notificationLines(), contentType: "application/x-ndjson")
        case (.GET, "/mock/consumption"):
            return .text(.ok, consumptionAnswerLines(), contentType: "application/x-ndjson")
        case (.GET, "/mock/stats"):
            return .json(.ok, statistics.snapshot)
        case (.POST, "/mock/stats/reset"):
            statistics.reset()
            return .json(.ok, statistics.snapshot)
        case (.GET, "/mock/health"):
            return .json(.ok, ["status": "ok"])
        case (.GET, "/mock/faults"):
            return .json(.ok, faults.withLock { $0 })
        case (.POST, "/mock/faults"):
            guard let updated = try? JSONDecoder().decode(FaultConfiguration.self, from: Data(buffer: request.body)) else {
                return .text(.badRequest, "expected a JSON fault configuration")
            }
            faults.withLock { $0 = updated }
            return .json(.ok, updated)
        case (.POST, "/mock/refund"):
            guard let transactionId = request.queryValue("transactionId") else { return .text(.badRequest, "transactionId is required") }
            guard scale == nil else { return .text(.badRequest, "refunds at run time are not available in scale mode") }
            let bundleId = request.queryValue("bundleId")
            let environment = request.queryValue("environment")
            let owners = simulatedWorlds.filter { world in
                (bundleId == nil || world.scenario.bundleId == bundleId)
                    && (environment == nil || world.scenario.environment.rawValue.lowercased() == environment?.lowercased())
                    && world.has(transactionId: transactionId)
            }
            guard owners.count <= 1 else {
                return .text(
                    .badRequest,
                    "transaction \(transactionId) is in \(owners.map(\.key.description).joined(separator: ", ")): choose with &bundleId= and &environment="
                )
            }
            guard let owner = owners.first, let notification = try? owner.catalog.refund(transactionId: transactionId, at: Self.nowMilliseconds)
            else {
                return .text(.notFound, "unknown transaction \(transactionId)")
            }
            let webhook = configuration.webhookURL
            Task {
                let result = webhook == nil ? SendAttemptResult.success : await post(notification.signedPayload, to: webhook!)
                owner.attempts.record(
                    notification.plan.notificationUUID,
                    SendAttemptItem(attemptDate: notification.firstAttemptDate, sendAttemptResult: result))
            }
            return .json(
                .ok,
                [
                    "notificationUUID": notification.plan.notificationUUID, "bundleId": owner.scenario.bundleId,
                    "environment": owner.scenario.environment.rawValue,
                ])
        default:
            return .text(.notFound, "Not Found")
        }
    }
}

extension MockAppStore {
    /// A line of `GET /mock/notifications`: what a test decodes to know which notifications a
    /// window holds and which ones Apple failed to deliver.
    ///
    /// ```swift
    /// let lines = try text.split(separator: "\n").map { try JSONDecoder().decode(MockAppStore.NotificationLine.self, from: Data($0.utf8)) }
    /// let undelivered = lines.filter { !$0.delivered && !$0.forged }
    /// ```
    package struct NotificationLine: Codable, Hashable, Sendable {
        package var notificationUUID: String
        package var notificationType: String
        package var subtype: String?
        /// UNIX ms, as the signed payload says.
        package var signedDate: Int64
        /// When the App Store first tried to send it, UNIX ms.
        package var firstAttemptDate: Int64
        /// A send attempt succeeded.
        package var delivered: Bool
        /// Signed by a stranger's CA (`--forged`): a reconciler must quarantine it.
        package var forged: Bool
        package var bundleId: String
        /// `Production` or `Sandbox`.
        package var environment: String
        /// SHA-256 (hex) of the signed payload as the mock signed it, to compare with what a reconciler
        /// stored or forwarded (absent in scale mode, which signs a notification when it is served).
        package var signedPayloadSHA256: String? = nil
        /// The purchase the notification is about, if any.
        package var originalTransactionId: String? = nil
    }

    /// One line per notification of every app and environment, in history order (by first send
    /// attempt or `signedDate`, then notificationUUID).
    func notificationLines() -> String {
        var keyed: [(key: (Int64, String), line: NotificationLine)] = []
        for world in simulatedWorlds {
            let key = world.key
            if let scale = world.scale {
                // One world in scale mode: its lines come in history order.
                keyed += scale.notificationLines(bundleId: key.bundleId, environment: key.environment.rawValue).map { ((0, ""), $0) }
                continue
            }
            keyed += world.catalog.snapshot.notifications.map { notification in
                let plan = notification.plan
                let line = NotificationLine(
                    notificationUUID: plan.notificationUUID, notificationType: plan.notificationType.rawValue, subtype: plan.subtype?.rawValue,
                    signedDate: plan.signedDate, firstAttemptDate: notification.firstAttemptDate,
                    delivered: world.attempts.attempts(plan.notificationUUID).contains { $0.sendAttemptResult == .success },
                    forged: notification.forged, bundleId: key.bundleId, environment: key.environment.rawValue,
                    signedPayloadSHA256: SHA256.hash(data: Data(notification.signedPayload.utf8)).map { String(format: "%02x", $0) }.joined(),
                    originalTransactionId: plan.originalTransactionId)
                return (notification.historyKey, line)
            }
        }
        if simulatedWorlds.count > 1 { keyed.sort { $0.key < $1.key } }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        var text = ""
        for (_, line) in keyed {
            if let data = try? encoder.encode(line) { text += String(decoding: data, as: UTF8.self) + "\n" }
        }
        return text
    }
}
