import AppStoreServer
import ArgumentParser
import Foundation
import Logging
import MockAppStore
import PostgresNIO
import Reconciler

/// `reconciler-bench`: the measurements behind BENCHMARKS.md. Run it through
/// `jobs/dev/benchmark`, which builds it in release mode against a throwaway PostgreSQL.
@main
struct Benchmarks: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reconciler-bench",
        abstract: "Measure signed-data verification and replay into PostgreSQL (whole runs: jobs/dev/benchmark).",
        subcommands: [VerifyBenchmark.self, ApplyBenchmark.self])
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
        commandName: "apply", abstract: "Verify and apply notifications into PostgreSQL in pages of 20, as phase 1 does (DATABASE_URL).")

    @Option(help: "Customers of the scenario that produces the notifications.") var customers: Int = 2000
    @Option(help: "Pages applied at once.") var concurrency: Int = 8
    @Option(help: "Queue every new notification for this webhook too, as `run --forward-to` does (nothing is sent).")
    var forwardTo: String?

    func run() async throws {
        let logger = quietLogger()
        let (mock, payloads) = try await signedNotifications(customers: customers, seed: 99)
        guard let url = ProcessInfo.processInfo.environment["DATABASE_URL"] else { throw ValidationError("DATABASE_URL is required") }
        let client = PostgresClient(
            configuration: try DatabaseSettings(url: url, maximumConnections: concurrency + 4).clientConfiguration,
            backgroundLogger: logger)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            defer { group.cancelAll() }
            try await Migrator().migrate(client, logger: logger)
            let handler = NotificationHandler(verifier: try mock.verifier(), database: Database(client: client, logger: logger))
            let pages = stride(from: 0, to: payloads.count, by: 20).map { Array(payloads[$0..<min($0 + 20, payloads.count)]) }
            let queue = PageQueue(pages)
            let forwarding = forwardTo.map { NotificationHandler.Forwarding(targetURL: $0) }
            let cpuAtStart = processCPUSeconds()
            let (_, seconds) = try await elapsed {
                try await withThrowingTaskGroup(of: Void.self) { workers in
                    for _ in 0..<concurrency {
                        workers.addTask {
                            while let page = await queue.next() {
                                var verified: [VerifiedNotification] = []
                                for payload in page { verified.append(try await handler.verify(signedPayload: payload)) }
                                let toApply = verified
                                _ = try await handler.record(toApply, source: .history(runId: 0), forwarding: forwarding)
                            }
                        }
                    }
                    try await workers.waitForAll()
                }
            }
            // What the pages wrote besides the notifications: the change feed and the forward queue.
            var counts: [Int] = []
            for table in ["notifications", "purchase_changes", "forward_queue"] {
                let rows = try await client.query(PostgresQuery(unsafeSQL: "SELECT count(*)::bigint FROM \(table)"), logger: logger)
                for try await count in rows.decode(Int64.self) { counts.append(Int(count)) }
            }
            print(
                String(
                    format: "apply: %d notifications in %d pages, concurrency %d: %.2f s = %.0f notifications/s (%.0f pages/s)",
                    payloads.count, pages.count, concurrency, seconds, Double(payloads.count) / seconds, Double(pages.count) / seconds))
            print(
                String(
                    format: "  rows written: %d notifications, %d change-feed rows, %d forward-queue rows; this process used %.1f s of CPU"
                        + " applying (verification included)", counts[0], counts[1], counts[2], cpuAtStart.distance(to: processCPUSeconds())))
        }
    }
}

actor PageQueue {
    var pages: [[String]]
    init(_ pages: [[String]]) { self.pages = pages.reversed() }
    func next() -> [String]? { pages.popLast() }
}
