package import AppStoreServer
import Foundation
package import Logging
import PostgresNIO
package import ReconcilerDomain
package import ReconcilerShared

/// The SQL that writes verified App Store data and reads purchase state: `transactions`,
/// `purchases` and the change feed's rows are written here and nowhere else (`notifications` by
/// ``NotificationLog``, `history_revisions` by ``CustomerStore``). Every
/// method runs on a connection the caller holds inside a transaction, so notifications, their
/// transactions and the purchases they change commit together (or not at all).
///
/// Writes are set-based: a whole page travels as one JSON array and is written by one statement
/// per kind of row, because PostgreSQL round trips, not CPU, bound a replay's speed. Rows are
/// matched to columns by name (`jsonb_populate_recordset`), never by position, so a column added
/// or reordered cannot shift a value into the wrong place. Only parameterised SQL.
///
/// In a dry run the store works on the run's ``ShadowSchema``: the rows a page touches are
/// copied there first, and every statement then reads and writes the copies.
///
/// One file per job: `+Locks` (the purchases' locks, a dry run's copies), `+Write` (the one write
/// path and its feed rows), `+Transactions` (`transactions`), `+Purchases` (what notifications and
/// snapshots move forward on `purchases`), `+Export`, `+Changes` (reading the feed), `+Customer`,
/// `+Entitlement`, `+Pruning` and `+SignedValues`.
package struct PurchaseStore: Sendable {
    package let logger: Logger
    /// Set in a dry run: touched rows are copied into the shadow tables before they are used.
    package let shadow: ShadowSchema?
    /// The app and environment whose purchases this store writes and reads, with the app's rule
    /// for `entitled`; `nil` for a store that only reads across every app (export, the feed, the
    /// forwarding queue), which judges each app's rows by the rules it is given.
    package let scope: AppScope?
    /// The headers known to be stored (``Database/storeHeaders(of:)``): a statement that records
    /// signed values sends only the others (a 4.4 KB header, twice per batch, otherwise), and the
    /// hashes of these, which it checks are still stored (``JWSHeaders/missingSQL(parameter:)``).
    let storedHeaders: StoredHeaders?

    package init(logger: Logger, scope: AppScope? = nil) {
        self.init(logger: logger, shadow: nil, scope: scope)
    }

    package init(logger: Logger, shadow: ShadowSchema?, scope: AppScope?) {
        self.init(logger: logger, shadow: shadow, scope: scope, storedHeaders: nil)
    }

    private init(logger: Logger, shadow: ShadowSchema?, scope: AppScope?, storedHeaders: StoredHeaders?) {
        self.logger = logger
        self.shadow = shadow
        self.scope = scope
        self.storedHeaders = storedHeaders
    }

    /// The store of one app's purchases in a database, as the database's configuration says (a dry
    /// run's shadow, the headers already stored).
    package init(database: Database, scope: AppScope?) {
        self.init(logger: database.logger, shadow: database.shadow, scope: scope, storedHeaders: database.storedHeaders)
    }

    /// The app and environment of this store, when it has one.
    package var target: AppTarget? { scope?.target }

    /// The rule `entitled` is judged by: the app's (the default rule for a store across apps).
    var entitlement: EntitlementPolicy { scope?.entitlement ?? .init() }

    /// The app and environment a write or a read of one purchase is for.
    var requiredTarget: AppTarget {
        get throws {
            guard let target else {
                throw ReconcilerError(.missingApp, "a purchase was read or written without naming its app")
            }
            return target
        }
    }
    package var bundleId: String { get throws { try requiredTarget.bundleId } }
    package var environment: AppStoreEnvironment { get throws { try requiredTarget.environment } }

    /// The notifications this store's app records (`notifications`, and the forwarding queue rows
    /// written with them).
    package var notifications: NotificationLog { NotificationLog(logger: logger, target: target, storedHeaders: storedHeaders) }

    /// This app's customers and where their transaction history resumes.
    package var customers: CustomerStore {
        get throws { CustomerStore(logger: logger, shadow: shadow, target: try requiredTarget) }
    }

    /// A JSON array of rows, bound as one parameter (``RowJSON``).
    package static func json(_ rows: some Encodable) throws -> String {
        try RowJSON.encode(rows)
    }
}

extension ReconcilerError {
    /// Reads a state the reconciler itself stored in `column`; a value it does not know throws
    /// ``Code/unknownStoredValue`` instead of falling back to a guess (the value is in
    /// ``debugDescription`` only: a column of the reconciler's own states, but still stored data).
    static func stored<State: RawRepresentable>(_ raw: String, in column: String, as state: State.Type = State.self) throws -> State
    where State.RawValue == String {
        guard let value = State(rawValue: raw) else {
            throw ReconcilerError(
                .unknownStoredValue, "\(column) holds a value this version does not know (written by a newer version, or by hand)",
                details: "\"\(raw)\"")
        }
        return value
    }
}
