import AppStoreServer
import Synchronization

/// Which row in flight reads which customer, by the customer's purchases (their
/// originalTransactionIds, per environment), so two rows naming one customer by different
/// transaction IDs do not both read it.
///
/// Which customer a transaction ID belongs to is known only from Apple's answer, so a row claims
/// the customer with the purchases of its first page of Get Transaction History, before it writes
/// anything. A row whose first page names a purchase another row in flight claimed stops there (one
/// request), waits for that row to finish, and finds the customer read.
///
/// ```swift
/// if let owner = claims.claim(originals, environment: .production, by: row.line) { await claims.wait(for: owner) }
/// defer { claims.release(owner: row.line) }
/// ```
final class CustomerClaims: Sendable {
    private struct State {
        /// Each claimed purchase's owner (a row's line).
        var owners: [String: Int] = [:]
        /// Each owner's purchases, so its release finds them.
        var claimed: [Int: [String]] = [:]
        /// The rows waiting for an owner to finish.
        var waiters: [Int: [CheckedContinuation<Void, Never>]] = [:]
    }

    private let state = Mutex(State())

    /// Claims the customer of `originals` for `owner`, unless another row in flight claimed one of
    /// them first: that row's owner is returned, and nothing is claimed.
    func claim(_ originals: Set<String>, environment: AppStoreEnvironment, by owner: Int) -> Int? {
        let keys = originals.map { "\(environment.rawValue):\($0)" }
        return state.withLock { state in
            for key in keys { if let other = state.owners[key], other != owner { return other } }
            for key in keys { state.owners[key] = owner }
            state.claimed[owner, default: []] += keys
            return nil
        }
    }

    /// Ends `owner`'s claims (its row finished, however it ended) and wakes the rows waiting for it.
    func release(owner: Int) {
        let waiting = state.withLock { state in
            for key in state.claimed.removeValue(forKey: owner) ?? [] where state.owners[key] == owner { state.owners[key] = nil }
            return state.waiters.removeValue(forKey: owner) ?? []
        }
        for waiter in waiting { waiter.resume() }
    }

    /// Returns once `owner` has released its claims (at once when it holds none).
    func wait(for owner: Int) async {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state in
                guard state.claimed[owner] != nil else { return true }
                state.waiters[owner, default: []].append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }
}
