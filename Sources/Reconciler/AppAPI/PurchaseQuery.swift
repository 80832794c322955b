package import AppStoreServer
import Foundation
package import ReconcilerDomain

/// What `GET /v1/purchases` asks: an app and environment (`bundleId`, `environment`: `production`
/// or `sandbox`, lower-case) and exactly one key naming the purchases. Parameter names are
/// case-sensitive; a parameter missing, unknown, repeated, empty or of the wrong form is refused
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

    package var bundleId: String
    package var environment: AppStoreEnvironment
    package var key: Key

    /// The app and environment it asks about.
    package var target: AppTarget { AppTarget(bundleId: bundleId, environment: environment) }

    package init(bundleId: String, environment: AppStoreEnvironment, key: Key) {
        self.bundleId = bundleId
        self.environment = environment
        self.key = key
    }

    /// The query parameters as the request gave them (percent-decoded), in order.
    package init(parameters: [(name: String, value: String)]) throws {
        var values: [String: String] = [:]
        let known = Set(["bundleId", "environment"] + Key.parameterNames)
        for (name, value) in parameters {
            // Refreshes from Apple (issue 36's refresh=if-stale|always, maxAge, timeout) are not served
            // yet: said as such, not answered with the stored state as if Apple had been asked.
            guard !["refresh", "maxAge", "timeout"].contains(name) else {
                throw Self.invalid("\(name): this version answers only the stored state; refreshes from Apple are not served yet")
            }
            guard known.contains(name) else {
                throw Self.invalid(
                    "unknown query parameter \(Self.quoted(name)); GET /v1/purchases takes bundleId, environment and one of "
                        + Key.parameterNames.joined(separator: ", ") + " (names are case-sensitive)")
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
    }

    private static func invalid(_ detail: String) -> ReconcilerError { ReconcilerError(.invalidQuery, detail) }

    private static func quoted(_ text: String) -> String { CustomerRepair.Selector.quoted(text) }
}
