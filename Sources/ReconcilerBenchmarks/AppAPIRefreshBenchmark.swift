import AppStoreServer
import ArgumentParser
import Foundation
import MockAppStore
import Reconciler
import ReconcilerDomain
import ReconcilerShared
import ReconcilerStore

/// What a refresh of the app API costs beyond Apple's latency (issue 36: "a refresh costs Apple's
/// latency plus at most 20 ms"): `refresh=always` reads of one customer after another through
/// ``AppRefresher`` (the stored read, Apple's requests over HTTP to the mock, verification, the
/// apply, the stored read of the answer), with the mock adding a known latency to each App Store
/// request. A refresh's cost is its answer time minus Apple's part: that latency times the
/// requests it made (they are made one after the other) and the mock's own time answering them
/// (``MockStatistics/Counts/answeringMicroseconds``: signing, which Apple's servers do too). The
/// mock runs in this process, so its work also takes CPU from the refresh's: an upper bound. The app API's HTTP and token check are not in it (the
/// `app-api` case measures stored reads through serve).
struct AppAPIRefreshBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "app-api-refresh",
        abstract: "The app API's refresh=always: answer time minus the mock's latency per Apple request, p50/p99 (DATABASE_URL).")

    @Option(help: "Customers of the mock's scenario; each purchase is refreshed once first, then --rounds times known.") var customers: Int = 100
    @Option(help: "Refreshes of every known customer measured.") var rounds: Int = 2
    @Option(help: "Latency the mock adds to every App Store request, milliseconds.") var latencyMs: Int = 50

    func run() async throws {
        guard let url = ProcessInfo.processInfo.environment["DATABASE_URL"] else { throw ValidationError("DATABASE_URL is required") }
        let logger = quietLogger()
        let database = try Database(settings: try DatabaseSettings(url: url, maximumConnections: 8), logger: logger)
        var faults = FaultConfiguration()
        faults.latencyMilliseconds = latencyMs
        let (customers, rounds, latency) = (self.customers, self.rounds, Double(latencyMs) / 1000)
        try await MockAppStore.withRunning(.init(scenario: .init(seed: 36, customers: customers), faults: faults)) { mock, baseURL in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await database.run() }
                defer { group.cancelAll() }
                try await Migrator().migrate(database)
                let verifier = try mock.verifier()
                let scope = AppScope(target: verifier.configuration.target, entitlement: .init())
                let origins = SettingOrigins(
                    bundleId: .named("bench"), appAppleId: .named("bench"), environment: .named("bench"), keyId: .named("bench"),
                    issuerId: .named("bench"), privateKeyPath: .named("bench"), rootCertificates: .named("bench"))
                // A budget far above what one refresh at a time spends: the figure is the path's, not the limiter's.
                let refresher = AppRefresher(
                    configuration: .init(refreshRateLimit: 1000), scope: scope, database: database, verifier: verifier,
                    client: mock.client(baseURL: baseURL, requestsPerSecond: 1000), origins: origins,
                    budget: RequestBudget(environment: scope.target.environment, appRequestsPerSecond: 1000))
                var originals: [String] = []
                for sent in mock.sentNotifications {
                    if let id = sent.notification.originalTransactionId, !originals.contains(id) { originals.append(id) }
                }
                var unknown = Sample()
                var known = Sample()
                for round in 0...rounds {
                    for original in originals {
                        let query = PurchaseQuery(
                            bundleId: scope.target.bundleId, environment: scope.target.environment, key: .transactionId(original), refresh: .always,
                            timeout: PurchaseQuery.maximumTimeout)
                        let before = mock.statisticsSnapshot
                        let (purchases, seconds) = try await elapsed { try await refresher.purchases(query, at: { .now }) }
                        let after = mock.statisticsSnapshot
                        let requests = after.requests.values.reduce(0, +) - before.requests.values.reduce(0, +)
                        // Apple's part: its latency, and the mock's own time answering (signing), which Apple's servers spend too.
                        let apple = Double(requests) * latency + Double(after.answeringMicroseconds - before.answeringMicroseconds) / 1_000_000
                        let fresh = !purchases.isEmpty && purchases.allSatisfy(\.fresh)
                        if round == 0 {
                            unknown.add(seconds - apple, requests: requests, fresh: fresh)
                        } else {
                            known.add(seconds - apple, requests: requests, fresh: fresh)
                        }
                    }
                }
                await refresher.stop()
                print(
                    "mock latency: \(latencyMs) ms per App Store request; \(originals.count) purchases of \(customers) customers, one refresh at a time"
                )
                print(unknown.line("first round (each purchase's first refresh; a customer's first reads its whole history)"))
                print(known.line("refresh=always of a known customer (history from the stored revision)"))
            }
        }
    }

    /// Costs (answer time minus the mock's latency), seconds.
    struct Sample {
        var costs: [Double] = []
        var requests = 0
        var notFresh = 0

        mutating func add(_ cost: Double, requests: Int, fresh: Bool) {
            costs.append(cost)
            self.requests += requests
            if !fresh { notFresh += 1 }
        }

        func line(_ label: String) -> String {
            let sorted = costs.sorted()
            func percentile(_ p: Double) -> String {
                guard !sorted.isEmpty else { return "-" }
                let value = sorted[min(sorted.count - 1, Int((p * Double(sorted.count)).rounded(.up)) - 1)]
                return String(format: "%.1f ms", value * 1000)
            }
            let perRefresh = costs.isEmpty ? 0 : Double(requests) / Double(costs.count)
            return "\(label): \(costs.count) refreshes, \(String(format: "%.2f", perRefresh)) Apple requests each, "
                + "cost beyond Apple's latency p50 \(percentile(0.5)), p99 \(percentile(0.99)), max \(percentile(1)); not fresh: \(notFresh)"
        }
    }
}
