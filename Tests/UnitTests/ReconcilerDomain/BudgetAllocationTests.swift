import AppStoreServer
import ReconcilerDomain
import Testing

@testable import Reconciler
@testable import ReconcilerStore

/// How the app's budget is divided (pure functions: no database, no time).
@Suite struct BudgetAllocationTests {
    static let history = AppStoreServerAPIEndpoint.getNotificationHistory.name
    static let transactions = AppStoreServerAPIEndpoint.getTransactionHistory.name
    static let statuses = AppStoreServerAPIEndpoint.getAllSubscriptionStatuses.name

    /// `run` pages the notification history, the customers' transaction history and statuses;
    /// `work` only the last two.
    static func run(budget: Double = 40, cap: Double? = nil) -> BudgetAllocation.Declaration {
        [history: .init(appBudget: budget, cap: cap), transactions: .init(appBudget: budget, cap: cap), statuses: .init(appBudget: budget, cap: cap)]
    }

    static func worker(budget: Double = 40, cap: Double? = nil) -> BudgetAllocation.Declaration {
        [transactions: .init(appBudget: budget, cap: cap), statuses: .init(appBudget: budget, cap: cap)]
    }

    static func processes(run: BudgetAllocation.Declaration, workers: [BudgetAllocation.Declaration]) -> [String: BudgetAllocation.Declaration] {
        var processes = ["run": run]
        for (index, worker) in workers.enumerated() { processes["worker-\(index + 1)"] = worker }
        return processes
    }

    /// Each process's share of `endpoint`, by process.
    static func shares(of endpoint: String, _ processes: [String: BudgetAllocation.Declaration]) -> [String: Double] {
        processes.keys.reduce(into: [:]) { shares, process in
            shares[process] = BudgetAllocation.shares(of: process, among: processes)[endpoint]
        }
    }

    /// DESIGN.md's example: a run capped at 40 and three workers capped at 10, app budget 40:
    /// 10 + 10 + 10 + 10 on the transaction history; the workers never page the notification
    /// history, so the run spends all of its 40.
    @Test func aRunAndThreeWorkersCappedAtTenSpendTheWholeBudget() {
        let processes = Self.processes(run: Self.run(cap: 40), workers: Array(repeating: Self.worker(cap: 10), count: 3))
        let transactions = Self.shares(of: Self.transactions, processes)
        #expect(transactions == ["run": 10, "worker-1": 10, "worker-2": 10, "worker-3": 10])
        #expect(transactions.values.reduce(0, +) == 40)
        #expect(Self.shares(of: Self.history, processes) == ["run": 40])
    }

    /// A worker's `--rate-limit` caps that worker alone; what it leaves goes to the others: an
    /// uncapped run and three workers capped at 5: 25 + 5 + 5 + 5.
    @Test func aWorkersCapLimitsOnlyThatWorker() {
        let processes = Self.processes(run: Self.run(), workers: Array(repeating: Self.worker(cap: 5), count: 3))
        #expect(Self.shares(of: Self.transactions, processes) == ["run": 25, "worker-1": 5, "worker-2": 5, "worker-3": 5])
        // Uncapped workers share evenly with the run.
        let even = Self.processes(run: Self.run(), workers: Array(repeating: Self.worker(), count: 3))
        #expect(Self.shares(of: Self.transactions, even) == ["run": 10, "worker-1": 10, "worker-2": 10, "worker-3": 10])
        // One capped worker among uncapped ones: the rest is divided evenly.
        let mixed = Self.processes(run: Self.run(), workers: [Self.worker(cap: 4), Self.worker(), Self.worker()])
        #expect(Self.shares(of: Self.transactions, mixed) == ["run": 12, "worker-1": 4, "worker-2": 12, "worker-3": 12])
    }

    /// Adding workers never lowers what the app spends on an endpoint, and the shares never add
    /// up to more than its budget.
    @Test(arguments: [nil, 1, 5, 10, 40] as [Double?])
    func addingWorkersNeverLowersWhatTheAppSpends(workerCap: Double?) {
        var spent = 0.0
        for count in 0...6 {
            let processes = Self.processes(run: Self.run(cap: 40), workers: Array(repeating: Self.worker(cap: workerCap), count: count))
            let total = Self.shares(of: Self.transactions, processes).values.reduce(0, +)
            #expect(total >= spent - 1e-9, "\(count) workers capped at \(String(describing: workerCap))")
            #expect(total <= 40 + 1e-9)
            #expect(Self.shares(of: Self.history, processes)["run"] == 40)
            spent = total
        }
    }

    /// When every process is capped below an even share, each spends its cap and the app spends
    /// less than its budget.
    @Test func capsThatAddUpToLessThanTheBudgetAreSpentWhole() {
        #expect(BudgetAllocation.divide(40, caps: [5, 5, 10]) == [5, 5, 10])
        #expect(BudgetAllocation.divide(40, caps: []) == [])
        #expect(BudgetAllocation.divide(4, caps: [nil, 1, nil]) == [1.5, 1, 1.5])
    }

    /// Processes that disagree on the app's budget (a misconfiguration) share the smallest, so
    /// the disagreement never overspends.
    @Test func processesThatDisagreeShareTheSmallestBudget() {
        let processes = Self.processes(run: Self.run(budget: 40), workers: [Self.worker(budget: 20)])
        #expect(Self.shares(of: Self.transactions, processes) == ["run": 10, "worker-1": 10])
        #expect(Self.shares(of: Self.history, processes) == ["run": 40])
    }

    /// A row written by an earlier version (`{"Get Transaction History": 40}`: the rate it spent
    /// at most) counts as a user of each endpoint it lists, capped at that rate.
    @Test func aDeclarationOfAnEarlierVersionIsReadAsAUserOfEachEndpoint() {
        #expect(BudgetLedger.declaration(#"{"Get Transaction History": 10}"#) == [Self.transactions: .init(appBudget: 10, cap: 10)])
        #expect(BudgetLedger.declaration(#"{"Get Transaction History": {"appBudget": 40}}"#) == [Self.transactions: .init(appBudget: 40)])
    }

    /// The app's budget setting sets the three endpoints a recovery pages; `--rate-limit` caps
    /// every endpoint of this process.
    @Test func theAppsBudgetAndAProcessCap() {
        let budget = RequestBudget(environment: .production, appRequestsPerSecond: 30, cap: 10)
        #expect(budget.app[.getTransactionHistory] == 30)
        #expect(budget.app[.lookUpOrderId] == 8)
        #expect(budget.alone[.getTransactionHistory] == 10)
        #expect(budget.alone[.requestTestNotification] == 0.8)
        #expect(budget.claims([.getTransactionHistory]) == [.getTransactionHistory: .init(appBudget: 30, cap: 10)])
        #expect(RequestBudget(environment: .sandbox).alone[.getNotificationHistory] == 4)
    }
}
