package import AppStoreServer
import Foundation
package import ReconcilerDomain
import ReconcilerShared

/// What `GET /v1/purchases` asks: an app and environment (`bundleId`, `environment`: `production`
/// or `sandbox`, lower-case) and exactly one key naming the purchases. Parameter names are
/// case-sensitive; `refresh=if-stale` (with `maxAge`) or `refresh=always`, with `timeout`, asks
/// Apple first (``AppRefresher``). A parameter missing, unknown, repeated, empty or of the wrong form is refused
/// with ``ReconcilerError/Code/invalidQuery`` before anything is read.
///
/// ```swift
/// let query = try PurchaseQuery(parameters: [("bundleId", "com.example.app"), ("environment", "production"), ("transactionId", "2000000000000001")])
/// ```
package struct PurchaseQuery: Sendable, Hashable {
    /// What names the purchases.
    package enum Key: Sendable, Hashable {
        /// The purchase of this original transaction.
        case originalTransactionId(String)
        /// The purchase a transaction (or original transaction) belongs to.
        case transactionId(String)
        /// The purchases carrying the app's `appAccountToken` (a UUID, lower-cased).
        case appAccountToken(String)
        /// The purchases of the app's own user ID (`import` brings them).
        case appUserId(String)

        /// The query parameters that name a key, in the order the documentation lists them.
        package static let parameterNames = ["originalTransactionId", "transactionId", "appAccountToken", "appUserId"]
    }

    /// Whether Apple is read before answering (`refresh=`).
    package enum Refresh: Sendable, Hashable {
        /// `refresh=if-stale`: only when a purchase's customer was last checked longer than `maxAge` ago (or never, or none is stored).
        case ifStale(maxAge: Duration)
        /// `refresh=always`.
        case always
    }

    /// `refresh` (with `maxAge`, default `60s`), `nil` for the stored state alone.
    package var refresh: Refresh?
    /// How long the answer waits for Apple (`timeout`, default `3s`, at most ``maximumTimeout``).
    package var timeout: Duration = PurchaseQuery.defaultTimeout

    package static let defaultTimeout = Duration.seconds(3)
    package static let defaultMaxAge = Duration.seconds(60)
    package static let maximumTimeout = Duration.seconds(30)

    package var bundleId: String
    package var environment: AppStoreEnvironment
    package var key: Key

    /// The app and environment it asks about.
    package var target: AppTarget { AppTarget(bundleId: bundleId, environment: environment) }

    package init(
        bundleId: String, environment: AppStoreEnvironment, key: Key, refresh: Refresh? = nil, timeout: Duration = PurchaseQuery.defaultTimeout
    ) {
        self.bundleId = bundleId
        self.environment = environment
        self.key = key
        self.refresh = refresh
        self.timeout = timeout
    }

    /// The query parameters as the request gave them (percent-decoded), in order.
    package init(parameters: [(name: String, value: String)]) throws {
        var values: [String: String] = [:]
        let known = Set(["bundleId", "environment", "refresh", "maxAge", "timeout"] + Key.parameterNames)
        for (name, value) in parameters {
            guard known.contains(name) else {
                throw Self.invalid(
                    "unknown query parameter \(Self.quoted(name)); GET /v1/purchases takes bundleId, environment, one of "
                        + Key.parameterNames.joined(separator: ", ") + ", and refresh, maxAge, timeout (names are case-sensitive)")
            }
            guard values[name] == nil else { throw Self.invalid("\(name) is given twice") }
            guard !value.isEmpty else { throw Self.invalid("\(name) is empty") }
            values[name] = value
        }
        guard let bundleId = values["bundleId"] else { throw Self.invalid("bundleId is required") }
        guard let environment = values["environment"] else { throw Self.invalid("environment is required: production or sandbox") }
        switch environment {
        case "production": self.environment = .production
        case "sandbox": self.environment = .sandbox
        default: throw Self.invalid("environment must be production or sandbox (lower-case), not \(Self.quoted(environment))")
        }
        self.bundleId = bundleId
        let keys = Key.parameterNames.filter { values[$0] != nil }
        guard keys.count == 1, let name = keys.first, let value = values[name] else {
            throw Self.invalid(
                "give exactly one of " + Key.parameterNames.joined(separator: ", ") + (keys.isEmpty ? "" : " (\(keys.count) were given)"))
        }
        switch name {
        case "originalTransactionId", "transactionId":
            guard let id = CustomerRepair.Selector.transactionId(value), id == value else {
                throw Self.invalid("\(name): \(Self.quoted(value)) is not a transaction ID (digits, e.g. 2000000123456789)")
            }
            key = name == "transactionId" ? .transactionId(id) : .originalTransactionId(id)
        case "appAccountToken":
            guard let uuid = UUID(uuidString: value) else {
                throw Self.invalid("appAccountToken: \(Self.quoted(value)) is not a UUID (e.g. 7e3fb20b-4cdb-47cc-936d-99d65f608138)")
            }
            key = .appAccountToken(uuid.uuidString.lowercased())
        default:
            guard value.count <= 255 else { throw Self.invalid("appUserId is longer than 255 characters") }
            key = .appUserId(value)
        }
        try readRefresh(values)
    }

    /// `refresh`, `maxAge` and `timeout`: durations with their unit (`60s`, `500ms`, `5m`).
    private mutating func readRefresh(_ values: [String: String]) throws {
        func duration(_ name: String) throws -> Duration? {
            guard let text = values[name] else { return nil }
            guard let duration = Duration(parsing: text) else {
                throw Self.invalid("\(name): \(Self.quoted(text)) is not a duration with its unit (e.g. 500ms, 3s, 5m)")
            }
            return duration
        }
        let maxAge = try duration("maxAge")
        switch values["refresh"] {
        case nil:
            guard maxAge == nil, values["timeout"] == nil else { throw Self.invalid("maxAge and timeout go with refresh=if-stale or refresh=always") }
            return
        case "always":
            guard maxAge == nil else { throw Self.invalid("maxAge goes with refresh=if-stale, not refresh=always") }
            refresh = .always
        case "if-stale": refresh = .ifStale(maxAge: maxAge ?? Self.defaultMaxAge)
        case let other?: throw Self.invalid("refresh must be if-stale or always (lower-case), not \(Self.quoted(other))")
        }
        if let timeout = try duration("timeout") {
            guard timeout > .zero, timeout <= Self.maximumTimeout else {
                throw Self.invalid("timeout must be more than 0 and at most \(Self.maximumTimeout.operatorText)")
            }
            self.timeout = timeout
        }
    }

    /// The app and environment of a request that names only them (`bundleId` and `environment`,
    /// as `GET /v1/purchases` takes them): `POST /v1/consumption/{transactionId}`'s query.
    package static func app(of parameters: [(name: String, value: String)]) throws -> AppTarget {
        var values: [String: String] = [:]
        for (name, value) in parameters {
            guard name == "bundleId" || name == "environment" else {
                throw invalid("unknown query parameter \(quoted(name)); this endpoint takes bundleId and environment (names are case-sensitive)")
            }
            guard values[name] == nil else { throw invalid("\(name) is given twice") }
            values[name] = value
        }
        guard let bundleId = values["bundleId"], !bundleId.isEmpty else { throw invalid("bundleId is required") }
        switch values["environment"] {
        case "production": return AppTarget(bundleId: bundleId, environment: .production)
        case "sandbox": return AppTarget(bundleId: bundleId, environment: .sandbox)
        case nil: throw invalid("environment is required: production or sandbox")
        case let other?: throw invalid("environment must be production or sandbox (lower-case), not \(quoted(other))")
        }
    }

    private static func invalid(_ detail: String) -> ReconcilerError { ReconcilerError(.invalidQuery, detail) }

    private static func quoted(_ text: String) -> String { CustomerRepair.Selector.quoted(text) }
}
