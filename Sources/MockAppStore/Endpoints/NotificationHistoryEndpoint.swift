import AppStoreServer
import Foundation
import NIOFoundationCompat
import NIOHTTP1

/// Get Notification History with Apple's semantics: a window on the first send attempt (or, with
/// ``ScenarioConfiguration/HistoryDate/signedDate``, on `signedDate`: Apple documents neither), 20 per
/// page oldest first by that date, `hasMore` with a pagination token bound to the request body, either
/// `notificationType` (+ `notificationSubtype`) or `transactionId`, the rule that a type without a
/// subtype returns only notifications without a subtype, `onlyFailures`, the retention limit
/// (180 days, 30 in the sandbox) and the documented errors.
extension MockAppStore {

    /// Which subtypes each type can carry, as Apple documents them.
    static let subtypesByType: [String: Set<String>] = [
        "CONSUMPTION_REQUEST": [], "DID_CHANGE_RENEWAL_PREF": ["UPGRADE", "DOWNGRADE"],
        "DID_CHANGE_RENEWAL_STATUS": ["AUTO_RENEW_ENABLED", "AUTO_RENEW_DISABLED"], "DID_FAIL_TO_RENEW": ["GRACE_PERIOD"],
        "DID_RENEW": ["BILLING_RECOVERY"], "EXPIRED": ["VOLUNTARY", "BILLING_RETRY", "PRICE_INCREASE", "PRODUCT_NOT_FOR_SALE"],
        "EXTERNAL_PURCHASE_TOKEN": ["CREATED", "ACTIVE_TOKEN_REMINDER", "UNREPORTED"], "GRACE_PERIOD_EXPIRED": [],
        "METADATA_UPDATE": [], "MIGRATION": [], "OFFER_REDEEMED": ["UPGRADE", "DOWNGRADE"], "ONE_TIME_CHARGE": [],
        "PRICE_CHANGE": [], "PRICE_INCREASE": ["PENDING", "ACCEPTED"], "REFUND": [], "REFUND_DECLINED": [],
        "REFUND_REVERSED": [], "RENEWAL_EXTENDED": [], "RENEWAL_EXTENSION": ["SUMMARY", "FAILURE"], "RESCIND_CONSENT": [],
        "REVOKE": [], "SUBSCRIBED": ["INITIAL_BUY", "RESUBSCRIBE"], "TEST": [],
    ]

    struct HistoryQuery: Codable, Hashable {
        var startDate: Int64
        var endDate: Int64
        var notificationType: String?
        var notificationSubtype: String?
        var transactionId: String?
        var onlyFailures: Bool?
    }

    struct HistoryCursor: Codable {
        /// Hash of the request body the token belongs to.
        var query: String
        /// The history date (``MockCatalog/Notification/historyDate``) of the last item returned.
        var date: Int64
        var notificationUUID: String
        var expiresAt: Int64
    }

    func notificationHistory(_ request: MockHTTPRequest, in app: AppWorld, faults: FaultConfiguration) -> MockHTTPResponse {
        let now = Self.nowMilliseconds
        guard let decoded = try? JSONDecoder().decode([String: RawJSON].self, from: Data(buffer: request.body)) else {
            return Self.apiError(.badRequest, 4_000_000, "An error that indicates an invalid request.")
        }
        // A field sent as null is a field not sent.
        let object = decoded.filter { if case .null = $0.value { false } else { true } }
        guard let start = object["startDate"]?.integer else {
            return Self.apiError(.badRequest, 4_000_015, "Invalid start date.")
        }
        guard var end = object["endDate"]?.integer else {
            return Self.apiError(.badRequest, 4_000_016, "Invalid end date.")
        }
        end = min(end, now)
        guard start < end else {
            return Self.apiError(.badRequest, 4_000_013, "Start date after end date.")
        }
        let retentionDays: Int64 = app.scenario.environment == .production ? 180 : 30
        guard start >= now - retentionDays * 86_400_000 else {
            return Self.apiError(.badRequest, 4_000_012, "Start date is too far in the past.")
        }
        let type = object["notificationType"]?.string
        let subtype = object["notificationSubtype"]?.string
        let transactionId = object["transactionId"]?.string
        let onlyFailures = object["onlyFailures"]?.bool
        if object["notificationType"] != nil && type == nil || object["notificationSubtype"] != nil && subtype == nil {
            return Self.apiError(.badRequest, 4_000_018, "Invalid notification type.")
        }
        if object["transactionId"] != nil && transactionId == nil {
            return Self.apiError(.badRequest, 4_000_006, "Invalid transaction id.")
        }
        if type != nil, transactionId != nil {
            return Self.apiError(.badRequest, 4_000_019, "Multiple filters supplied.")
        }
        if let subtype {
            guard let type, Self.subtypesByType[type]?.contains(subtype) == true else {
                return Self.apiError(.badRequest, 4_000_018, "Invalid notification type.")
            }
        }
        if let type, Self.subtypesByType[type] == nil {
            return Self.apiError(.badRequest, 4_000_018, "Invalid notification type.")
        }
        let snapshot = app.catalog.snapshot
        let scale = app.scale
        var account: String?
        var customer: Int?
        if let transactionId {
            guard !transactionId.isEmpty, transactionId.allSatisfy(\.isNumber) else {
                return Self.apiError(.badRequest, 4_000_006, "Invalid transaction id.")
            }
            if let scale {
                customer = scale.customer(ofTransaction: transactionId)
                account = customer.map { "account-\($0)" }
            } else {
                account = snapshot.account(ofTransaction: transactionId)
            }
            guard account != nil else {
                noteCrossApp(transactionId: transactionId, in: app)
                return Self.apiError(.notFound, 4_040_010, "Transaction id not found.")
            }
        }
        // The token is bound to the body as sent, so any change to it is detected, and to the app.
        let query = HistoryQuery(
            startDate: start, endDate: object["endDate"]?.integer ?? end, notificationType: type,
            notificationSubtype: subtype, transactionId: transactionId, onlyFailures: onlyFailures)
        let queryHash = Self.hash(query) + " " + app.key.description
        var after: (Int64, String)?
        if let token = request.queryValue("paginationToken") {
            guard let cursor = tokens.decode(token, as: HistoryCursor.self) else {
                return Self.apiError(.badRequest, 4_000_014, "Invalid pagination token.")
            }
            if cursor.query != queryHash || cursor.expiresAt < now || roll(faults.expiredTokenRate, "expired token") {
                statistics.update(app.key) { $0.expiredTokens += 1 }
                return Self.apiError(.badRequest, 4_000_017, "Pagination token expired.")
            }
            after = (cursor.date, cursor.notificationUUID)
        }

        let lag = faults.apiLagMilliseconds
        var page: [NotificationHistoryResponseItem] = []
        var last: (Int64, String)?
        var hasMore = false
        if let scale {
            let filter: ScaleCatalog.Filter
            if let customer {
                filter = .customer(customer)
            } else if let type {
                // Without a subtype, only notifications without one (Apple's rule), as in the scan below.
                filter = .kind(subtype.map { "\(type)/\($0)" } ?? type)
            } else {
                filter = .everything
            }
            do {
                let found = try scale.page(
                    start: start, end: end, filter: filter, after: after, onlyFailures: onlyFailures == true,
                    pageSize: configuration.pageSize)
                (page, last, hasMore) = (found.items, found.last, found.hasMore)
            } catch {
                return Self.apiError(.internalServerError, 5_000_000, "An unknown error occurred.")
            }
        }
        for notification in snapshot.notifications where scale == nil {
            let key = notification.historyKey
            if let after, !(key > after) { continue }
            guard notification.historyDate >= start, notification.historyDate < end else { continue }
            // While the API lags, a notification is in the history from `lag` after it was first sent.
            guard lag == 0 || notification.historyDate <= now - lag else { continue }
            let plan = notification.plan
            if let type {
                guard plan.notificationType.rawValue == type else { continue }
                // Apple: without a subtype, only notifications that have no subtype.
                guard plan.subtype?.rawValue == subtype else { continue }
            }
            if let account, plan.accountId != account { continue }
            let sent = app.attempts.attempts(plan.notificationUUID)
            if onlyFailures == true, sent.contains(where: { $0.sendAttemptResult == .success }) { continue }
            if page.count == configuration.pageSize {
                hasMore = true
                break
            }
            page.append(NotificationHistoryResponseItem(signedPayload: notification.signedPayload, sendAttempts: sent))
            last = key
        }
        let cursorKey = last ?? after ?? (start, "")
        let token = tokens.encode(
            HistoryCursor(
                query: queryHash, date: cursorKey.0, notificationUUID: cursorKey.1,
                expiresAt: now + Int64(configuration.paginationTokenLifetime.components.seconds * 1000)))
        return .json(.ok, NotificationHistoryResponse(paginationToken: token, hasMore: hasMore, notificationHistory: page))
    }

    static func hash(_ value: some Encodable) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let data = (try? encoder.encode(value)) ?? Data()
        return data.base64EncodedString()
    }
}
