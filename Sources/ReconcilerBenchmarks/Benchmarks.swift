import AppStoreServer
import ArgumentParser
import Foundation
import Logging
import MockAppStore
import Reconciler
import ReconcilerDomain
import ReconcilerShared
import ReconcilerStore

/// `reconciler-bench`: the measurements behind BENCHMARKS.md. Run it through
/// `jobs/dev/benchmark`, which builds it in release mode against a throwaway PostgreSQL.
@main
struct Benchmarks: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reconciler-bench",
        abstract: "Measure signed-data verification and replay into PostgreSQL (whole runs: jobs/dev/benchmark).",
        subcommands: [
            VerifyBenchmark.self, ApplyBenchmark.self, WebhookBenchmark.self, UpgradeBenchmark.self, AppAPIBenchmark.self,
            AppAPIRefreshBenchmark.self,
        ])
}

func elapsed<T>(_ body: () async throws -> T) async rethrows -> (T, Double) {
    let clock = ContinuousClock()
    let start = clock.now
    let result = try await body()
    let duration = clock.now - start
    return (result, Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18)
}

/// CPU seconds (user + system) this process has used so far.
func processCPUSeconds() -> Double {
    var usage = rusage()
    #if os(Linux)
    getrusage(RUSAGE_SELF.rawValue, &usage)
    #else
    getrusage(RUSAGE_SELF, &usage)
    #endif
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}

func quietLogger() -> Logger {
    var logger = Logger(label: "bench")
    logger.logLevel = .error
    return logger
}

/// Signed notifications of a seeded scenario, without any server.
func signedNotifications(customers: Int, seed: UInt64) async throws -> (MockAppStore, [String]) {
    let mock = try await MockAppStore.make(configuration: .init(scenario: .init(seed: seed, customers: customers, span: 30 * 86_400_000)))
    let payloads = try await MockAppStore.withRunning(.init(scenario: mock.configuration.scenario)) { running, baseURL in
        var payloads: [String] = []
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let client = running.client(baseURL: baseURL, requestsPerSecond: 10_000)
        for try await page in client.notificationHistory(.init(startDate: now - 29 * 86_400_000, endDate: now)) {
            payloads += page.items.compactMap(\.signedPayload)
        }
        return (running, payloads)
    }
    return payloads
}

struct VerifyBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "verify", abstract: "Signed-data verification per core: full chain vs cached chain.")

    @Option(help: "Notifications to verify.") var count: Int = 5000

    func run() async throws {
        try await Task.detached {
            let authority = try SigningCertificateAuthority()
            let configuration = SignedDataVerifier.Configuration(
                rootCertificates: [authority.root], bundleId: "com.example.bench", appAppleId: 1, environment: .production)
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            let tokens = try (0..<count).map { index in
                try authority.signer.sign(
                    ResponseBodyV2DecodedPayload(
                        notificationType: .didRenew, notificationUUID: UUID().uuidString, signedDate: now - Int64(index),
                        data: NotificationData(appAppleId: 1, bundleId: "com.example.bench", environment: .production)))
            }
            // Full X.509 work every time: a fresh verifier (empty cache) per payload.
            let full = min(count, 1000)
            let (_, fullSeconds) = try await elapsed {
                for token in tokens.prefix(full) {
                    _ = try await SignedDataVerifier(configuration: configuration).verifyAndDecodeNotification(token)
                }
            }
            let verifier = try SignedDataVerifier(configuration: configuration)
            let (_, cachedSeconds) = try await elapsed {
                for token in tokens { _ = try await verifier.verifyAndDecodeNotification(token) }
            }
            print(
                String(
                    format: "verify full chain: %d in %.2f s = %.0f/s (%.0f µs each)", full, fullSeconds, Double(full) / fullSeconds,
                    fullSeconds / Double(full) * 1e6))
            print(
                String(
                    format: "verify cached chain: %d in %.2f s = %.0f/s (%.0f µs each)", count, cachedSeconds, Double(count) / cachedSeconds,
                    cachedSeconds / Double(count) * 1e6))
        }.value
    }
}

struct ApplyBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apply",
        abstract: "Apply verified notifications into PostgreSQL in pages of 20, as phase 1 does (DATABASE_URL).",
        discussion: """
            The pages are verified first (timed on their own), then applied by --concurrency workers: the \
            apply figure is what PostgreSQL and the write path sustain. With --order shards (the default) \
            each worker applies one contiguous slice of the history in order, as a run's time shards do; \
            with --order interleaved the workers take consecutive pages, so pages applied at once often \
            share purchases and wait for each other's locks (a worst case no run produces).
            """)

    enum Order: String, ExpressibleByArgument, CaseIterable {
        case shards
        case interleaved
    }

    @Option(help: "Customers of the scenario that produces the notifications.") var customers: Int = 2000
    @Option(help: "Pages applied at once.") var concurrency: Int = 8
    @Option(help: "Queue every new notification for this webhook too, as `run --forward-to` does (nothing is sent).")
    var forwardTo: String?
    @Option(help: "How workers share the pages: shards (contiguous slices, as a run) or interleaved (consecutive pages).")
    var order: Order = .shards

    func run() async throws {
        let logger = quietLogger()
        let (mock, payloads) = try await signedNotifications(customers: customers, seed: 99)
        guard let url = ProcessInfo.processInfo.environment["DATABASE_URL"] else { throw ValidationError("DATABASE_URL is required") }
        let database = try Database(settings: try DatabaseSettings(url: url, maximumConnections: concurrency + 4), logger: logger)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await database.run() }
            defer { group.cancelAll() }
            try await Migrator().migrate(database)
            let verifier = try mock.verifier()
            let handler = NotificationHandler(
                scope: AppScope(target: verifier.configuration.target, entitlement: .init()), verifier: verifier, database: database)
            // Verification first, on every core, as the run's shards verify their pages.
            let cpuBeforeVerifying = processCPUSeconds()
            let (verifiedPages, verifySeconds) = try await elapsed {
                try await withThrowingTaskGroup(of: (Int, [VerifiedNotification]).self) { verifiers in
                    for (index, start) in stride(from: 0, to: payloads.count, by: 20).enumerated() {
                        let page = Array(payloads[start..<min(start + 20, payloads.count)])
                        verifiers.addTask {
                            var verified: [VerifiedNotification] = []
                            for payload in page { verified.append(try await handler.verify(signedPayload: payload)) }
                            return (index, verified)
                        }
                    }
                    var pages: [Int: [VerifiedNotification]] = [:]
                    for try await (index, page) in verifiers { pages[index] = page }
                    return pages.keys.sorted().map { pages[$0]! }
                }
            }
            let verifyCPU = cpuBeforeVerifying.distance(to: processCPUSeconds())
            let sliceLength = (verifiedPages.count + concurrency - 1) / concurrency
            let queues = (0..<concurrency).map { worker in
                switch order {
                case .shards:
                    PageQueue(Array(verifiedPages.dropFirst(worker * sliceLength).prefix(sliceLength)))
                case .interleaved:
                    PageQueue(stride(from: worker, to: verifiedPages.count, by: concurrency).map { verifiedPages[$0] })
                }
            }
            let forwarding = forwardTo.map { NotificationLog.Forwarding(target: ForwardingTarget(url: $0)) }
            let cpuAtStart = processCPUSeconds()
            let (_, seconds) = try await elapsed {
                try await withThrowingTaskGroup(of: Void.self) { workers in
                    for queue in queues {
                        workers.addTask {
                            while let page = await queue.next() {
                                _ = try await handler.record(page, source: .history(runId: 0), forwarding: forwarding)
                            }
                        }
                    }
                    try await workers.waitForAll()
                }
            }
            let applyCPU = cpuAtStart.distance(to: processCPUSeconds())
            // What the pages wrote besides the notifications: the change feed and the forward queue.
            let stored = try await PurchaseStore(logger: logger).storedRows(in: database)
            print(
                String(
                    format: "verify: %d notifications (each with its transaction and renewal info) in %.2f s = %.0f notifications/s, %.1f s of CPU",
                    payloads.count, verifySeconds, Double(payloads.count) / verifySeconds, verifyCPU))
            print(
                String(
                    format:
                        "apply: %d verified notifications in %d pages, concurrency %d, order \(order.rawValue): %.2f s = %.0f notifications/s (%.0f pages/s)",
                    payloads.count, verifiedPages.count, concurrency, seconds, Double(payloads.count) / seconds,
                    Double(verifiedPages.count) / seconds))
            print(
                String(
                    format: "  rows written: %d notifications, %d change-feed rows, %d forward-queue rows; this process used %.1f s of CPU applying",
                    stored.notifications, stored.changes, stored.forwards, applyCPU))
            print(
                String(
                    format: "  verify + apply one after the other: %.0f notifications/s", Double(payloads.count) / (verifySeconds + seconds)))
        }
    }
}

actor PageQueue {
    var pages: [[VerifiedNotification]]
    init(_ pages: [[VerifiedNotification]]) { self.pages = pages.reversed() }
    func next() -> [VerifiedNotification]? { pages.popLast() }
}
