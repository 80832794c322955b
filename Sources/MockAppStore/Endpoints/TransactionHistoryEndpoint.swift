import AppStoreServer
import Foundation
import NIOHTTP1
import Synchronization

/// Get Transaction History (v2): every transaction of the customer's account (any of its
/// transaction ids names the account), newest version of each, sorted by modification date; a
/// `revision` returns only what was modified after it, so a modified transaction comes again.
/// Filters: `startDate`/`endDate` on purchaseDate, `productId`, `productType`,
/// `subscriptionGroupIdentifier`, `inAppOwnershipType`, `revoked`; `sort` ASCENDING or DESCENDING.
/// Signed transactions are signed at request time, as Apple's are.
extension MockAppStore {
    struct RevisionCursor: Codable {
        /// The app and environment (``AppKey``) the revision was issued for.
        var app: String
        var account: String
        var modifiedAt: Int64
        var transactionId: String
        var descending: Bool
    }

    static let productTypeFilters: [String: ProductType] = [
        "AUTO_RENEWABLE": .autoRenewableSubscription, "NON_RENEWABLE": .nonRenewingSubscription,
        "CONSUMABLE": .consumable, "NON_CONSUMABLE": .nonConsumable,
    ]

    /// Apple's error for a path parameter that is not a transaction id of any customer.
    struct TransactionIdError: Error { var response: MockHTTPResponse }

    /// The customer a path's transaction id belongs to (any transaction of the customer) in `app`:
    /// the snapshot that holds it and its account. A transaction ID of another app is not found,
    /// and counted; a customer listed in ``FaultConfiguration/failingCustomers`` gets its error.
    func customer(of anyTransactionId: String, in app: AppWorld) -> Result<(snapshot: MockCatalog.Snapshot, account: String), TransactionIdError> {
        guard !anyTransactionId.isEmpty, anyTransactionId.allSatisfy(\.isNumber) else {
            return .failure(.init(response: Self.apiError(.badRequest, 4_000_006, "Invalid transaction id.")))
        }
        let snapshot = app.snapshot(forTransaction: anyTransactionId)
        guard let account = snapshot.account(ofTransaction: anyTransactionId) else {
            noteCrossApp(transactionId: anyTransactionId, in: app)
            return .failure(.init(response: Self.apiError(.notFound, 4_040_010, "Transaction id not found.")))
        }
        if let failing = failingCustomerError(account: account, in: snapshot) { return .failure(.init(response: failing)) }
        return .success((snapshot, account))
    }

    /// The error a customer listed in ``FaultConfiguration/failingCustomers`` gets, if `account` is one.
    private func failingCustomerError(account: String, in snapshot: MockCatalog.Snapshot) -> MockHTTPResponse? {
        let faults = faults.withLock { $0 }
        guard faults.failingCustomers.contains(where: { snapshot.account(ofTransaction: $0) == account }) else { return nil }
        let code = faults.failingCustomersErrorCode
        switch code / 100_000 {
        case 40: return Self.apiError(.badRequest, code, "Bad request.")
        case 404: return Self.apiError(.notFound, code, "Not found.")
        default: return Self.apiError(.internalServerError, code, "An unknown error occurred.")
        }
    }

    func transactionHistory(_ request: MockHTTPRequest, anyTransactionId: String, in app: AppWorld) -> MockHTTPResponse {
        let (snapshot, account): (MockCatalog.Snapshot, String)
        switch customer(of: anyTransactionId, in: app) {
        case .success(let found): (snapshot, account) = found
        case .failure(let error): return error.response
        }
        var startDate: Int64?
        var endDate: Int64?
        if let value = request.queryValue("startDate") {
            guard let parsed = Int64(value) else { return Self.apiError(.badRequest, 4_000_015, "Invalid start date.") }
            startDate = parsed
        }
        if let value = request.queryValue("endDate") {
            guard let parsed = Int64(value) else { return Self.apiError(.badRequest, 4_000_016, "Invalid end date.") }
            endDate = parsed
        }
        if let startDate, let endDate, startDate >= endDate {
            return Self.apiError(.badRequest, 4_000_013, "Start date after end date.")
        }
        let sort = request.queryValue("sort") ?? "ASCENDING"
        guard sort == "ASCENDING" || sort == "DESCENDING" else {
            return Self.apiError(.badRequest, 4_000_021, "Invalid sort parameter.")
        }
        let descending = sort == "DESCENDING"
        var productTypes: Set<ProductType> = []
        for value in request.queryValues("productType") {
            guard let type = Self.productTypeFilters[value] else { return Self.apiError(.badRequest, 4_000_022, "Invalid product type.") }
            productTypes.insert(type)
        }
        let productIds = Set(request.queryValues("productId"))
        let groups = Set(request.queryValues("subscriptionGroupIdentifier"))
        let ownership = request.queryValue("inAppOwnershipType")
        if let ownership, ownership != "FAMILY_SHARED", ownership != "PURCHASED" {
            return Self.apiError(.badRequest, 4_000_026, "Invalid in-app ownership type.")
        }
        var revoked: Bool?
        if let value = request.queryValue("revoked")?.lowercased() {
            // Apple's Swift library sends true/false, its Python library True/False.
            guard value == "true" || value == "false" else { return Self.apiError(.badRequest, 4_000_030, "Invalid revoked parameter.") }
            revoked = value == "true"
        }
        var after: RevisionCursor?
        if let revision = request.queryValue("revision") {
            guard let cursor = tokens.decode(revision, as: RevisionCursor.self), cursor.app == app.key.description, cursor.account == account,
                cursor.descending == descending
            else {
                return Self.apiError(.badRequest, 4_000_005, "Invalid request revision.")
            }
            after = cursor
        }

        let lag = faults.withLock { $0.apiLagMilliseconds }
        var entries = snapshot.transactions(ofAccount: account, lag: lag, now: Self.nowMilliseconds)
        if descending { entries.reverse() }
        var page: [MockCatalog.TransactionEntry] = []
        var hasMore = false
        for entry in entries {
            let payload = entry.payload
            if let after {
                let key = (entry.modifiedAt, payload.transactionId ?? "")
                let cursor = (after.modifiedAt, after.transactionId)
                if descending ? !(key < cursor) : !(key > cursor) { continue }
            }
            if let startDate, (payload.purchaseDate ?? 0) < startDate { continue }
            if let endDate, (payload.purchaseDate ?? 0) >= endDate { continue }
            if !productIds.isEmpty, !productIds.contains(payload.productId ?? "") { continue }
            if !productTypes.isEmpty, !productTypes.contains(payload.type ?? ProductType(rawValue: "")) { continue }
            if !groups.isEmpty, !groups.contains(payload.subscriptionGroupIdentifier ?? "") { continue }
            if let ownership, payload.inAppOwnershipType?.rawValue != ownership { continue }
            if let revoked, (payload.revocationDate != nil) != revoked { continue }
            if page.count == configuration.pageSize {
                hasMore = true
                break
            }
            page.append(entry)
        }
        let last = page.last.map {
            RevisionCursor(
                app: app.key.description, account: account, modifiedAt: $0.modifiedAt, transactionId: $0.payload.transactionId ?? "",
                descending: descending)
        }
        let revision = tokens.encode(
            last ?? after
                ?? RevisionCursor(
                    app: app.key.description, account: account, modifiedAt: descending ? Int64.max : Int64.min, transactionId: "",
                    descending: descending))
        let signedAt = Self.nowMilliseconds
        let scenario = app.scenario
        do {
            let signed = try page.map { entry in
                var payload = entry.payload
                payload.signedDate = signedAt
                return try app.catalog.signer.sign(payload)
            }
            return .json(
                .ok,
                HistoryResponse(
                    revision: revision, hasMore: hasMore, bundleId: scenario.bundleId, appAppleId: scenario.appAppleId,
                    environment: scenario.environment, signedTransactions: signed))
        } catch {
            return Self.apiError(.internalServerError, 5_000_000, "An unknown error occurred.")
        }
    }
}
