package import Foundation
package import ReconcilerDomain
package import ReconcilerShared
package import ReconcilerStore

/// Writes the change feed's `time` rows that fell due: for each app, the purchases whose
/// `entitled` flipped because a moment passed (``PurchaseStore/recordTimeFlips(since:until:limit:on:)``).
/// serve's leader calls it every tick (``ServeLeader``), and each run once; the unique key
/// (purchase, moment) lets them race and still write each row once.
///
/// Only moments after `now - lookback` are looked at: a purchase that ran out long before this
/// version was installed, or during a longer outage of every writer, gets no row (its state is
/// right in `export` either way).
///
/// ```swift
/// let written = try await TimeRowWriter(scopes: [scope], database: database).writeDue(at: .now)
/// ```
package struct TimeRowWriter: Sendable {
    /// How far back moments are looked at.
    package static let defaultLookback: Duration = .seconds(86_400)

    package let scopes: [AppScope]
    package let database: Database
    package let lookback: Duration

    package init(scopes: [AppScope], database: Database, lookback: Duration = Self.defaultLookback) {
        self.scopes = scopes
        self.database = database
        self.lookback = lookback
    }

    /// Writes every app's rows due by `now` (the caller's clock), in short transactions of at most
    /// a batch each, named by no run (a run reports how many it wrote, ``RunReport/timeRows``);
    /// returns the changes written.
    @discardableResult
    package func writeDue(at now: Timestamp) async throws -> [PurchaseChange] {
        var written: [PurchaseChange] = []
        let batch = 500
        for scope in scopes {
            let store = PurchaseStore(database: database, scope: scope)
            while true {
                let (changes, due) = try await database.transaction { transaction in
                    try await store.recordTimeFlips(since: now - lookback, until: now, limit: batch, on: transaction)
                }
                written += changes
                if due < batch { break }
            }
        }
        // A moment is due for `lookback` after it passed: what was recorded a day before that is
        // never due again.
        try await database.transaction { [database, lookback] transaction in
            try await PurchaseStore(database: database, scope: nil).forgetRecordedMoments(olderThan: lookback + .seconds(86_400), on: transaction)
        }
        return written
    }
}
