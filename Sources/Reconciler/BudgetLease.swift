/// One process's lease on an app's shared budget (``SharedBudget``) for callers that call Apple now
/// and then: `serve`'s app API refreshes and consumption answers, and its leader's automatic
/// consumption answers, which share one App Store client (one rate limiter) per app. Joined before
/// the first request of a burst (once for concurrent callers), renewed while any caller is in,
/// left once none came for ``idle`` (a process that has no requests takes no share from the
/// others), and left at once by ``stop()`` (serve's shutdown).
///
/// ```swift
/// let lease = BudgetLease(budget: SharedBudget(configuration: .init(claims: claims), database: database, limiter: client.rateLimiter, app: app))
/// try await lease.begin()
/// // … requests …
/// await lease.end()
/// ```
package actor BudgetLease {
    let budget: SharedBudget
    let idle: Duration
    private var active = 0
    private var generation = 0
    private var joining: Task<Void, any Error>?
    private var keeper: Task<Void, Never>?
    private var leaving: Task<Void, Never>?

    package init(budget: SharedBudget, idle: Duration = .seconds(30)) {
        self.budget = budget
        self.idle = idle
    }

    /// Joins (once for concurrent callers) before a caller's first request.
    package func begin() async throws {
        active += 1
        generation += 1
        if let leaving { await leaving.value }
        let budget = self.budget
        let joined = joining ?? Task { try await budget.join() }
        joining = joined
        do {
            try await joined.value
        } catch {
            if joining == joined { joining = nil }
            active -= 1
            throw error
        }
        if keeper == nil { keeper = Task { await budget.keepShared() } }
    }

    /// After a caller's requests: the budget is left once no caller came for ``idle``.
    package func end() {
        active -= 1
        guard active == 0 else { return }
        let (generation, idle) = (self.generation, self.idle)
        Task {
            try? await Task.sleep(for: idle)
            await self.leaveIfIdle(since: generation)
        }
    }

    private func leaveIfIdle(since generation: Int) async {
        guard active == 0, self.generation == generation else { return }
        await stop()
    }

    /// Leaves now (keepShared leaves when cancelled); a later ``begin()`` joins again.
    package func stop() async {
        guard let keeper else {
            joining = nil
            return
        }
        keeper.cancel()
        let leaving = Task { await keeper.value }
        self.leaving = leaving
        self.keeper = nil
        joining = nil
        await leaving.value
        if self.leaving == leaving { self.leaving = nil }
    }
}
