import AppStoreServer
import ArgumentParser
import AsyncHTTPClient
import Foundation
import MockAppStore
import NIOCore
import NIOHTTP1
import ReconcilerDomain

/// `reconciler-bench webhook`: the live path's throughput. Signs a world's notifications (the
/// mock's scenario, certificates as large as Apple's), writes the credentials `reconciler serve`
/// needs to trust them, waits until `serve` answers `/health`, then posts every notification once
/// from concurrent senders, as Apple delivers them, and prints the rate, the latency percentiles and
/// what was not answered 200. Its own CPU and the verification's cost per notification are printed
/// for the breakdown `jobs/dev/benchmark webhook` completes with serve's and PostgreSQL's CPU.
struct WebhookBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "webhook", abstract: "Post a world's notifications to `reconciler serve` from concurrent senders (jobs/dev/benchmark webhook).")

    @Option(help: "The webhook, e.g. http://127.0.0.1:8080 (POST /notifications, GET /health).") var url: String
    @Option(help: "Customers of the scenario that produces the notifications.") var customers: Int = 3000
    @Option(help: "Concurrent senders.") var senders: Int = 16
    @Option(help: "Where to write root.pem and reconciler.env for serve.") var credentialsDir: String
    @Option(help: "Scenario seed.") var seed: UInt64 = 101
    @Option(
        help: """
            How the senders post: sockets (a thread and one kept-alive connection each, blocking calls: little CPU beside serve) \
            or async-http-client (AsyncHTTPClient, the bench's senders before 2026-11-28: about 205 µs of CPU per notification).
            """)
    var client: Client = .sockets

    enum Client: String, ExpressibleByArgument, Sendable {
        case sockets
        case asyncHTTPClient = "async-http-client"
    }

    func run() async throws {
        let (url, customers, senders, credentials, seed, client) = (
            self.url, self.customers, self.senders, self.credentialsDir, self.seed, self.client
        )
        try await Task.detached {
            try await Self.measure(url: url, customers: customers, senders: senders, credentials: credentials, seed: seed, sendingWith: client)
        }.value
    }

    static func measure(url: String, customers: Int, senders: Int, credentials: String, seed: UInt64, sendingWith sender: Client) async throws {
        do {
            let (payloads, verifier) = try await world(customers: customers, seed: seed, credentials: credentials)
            let bytes = payloads.map(\.utf8.count).reduce(0, +)
            // What verifying costs serve per notification (the notification, its transaction and renewal
            // info, the chain cached), on one core, measured here on the same payloads.
            let sample = Array(payloads.prefix(3000))
            let cpuBefore = processCPUSeconds()
            for payload in sample {
                let notification = try await verifier.verifyNotification(payload)
                _ = try await verifier.verifySubscription(
                    signedTransactionInfo: notification.payload.data?.signedTransactionInfo,
                    signedRenewalInfo: notification.payload.data?.signedRenewalInfo)
            }
            let verifyMicroseconds = cpuBefore.distance(to: processCPUSeconds()) / Double(sample.count) * 1e6
            print(
                String(
                    format: "webhook: %d notifications of %d customers signed with Apple-sized certificates (%.1f KB each on average)",
                    payloads.count, customers, Double(bytes) / Double(payloads.count) / 1000))
            print(
                String(
                    format: "  verify (notification, transaction and renewal info), one core, chain cached: %.0f µs of CPU each", verifyMicroseconds))
            FileHandle.standardOutput.write(Data("  credentials written; waiting for serve\n".utf8))

            var clientConfiguration = HTTPClient.Configuration()
            clientConfiguration.timeout = .init(connect: .seconds(5), read: .seconds(30))
            // One connection per sender, kept alive, as Apple's senders reuse theirs.
            clientConfiguration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = senders
            let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: clientConfiguration)
            defer { Task { try? await client.shutdown() } }
            try await waitUntilAnswering("\(url)/health", with: client)
            let cpuAtStart = processCPUSeconds()
            let clock = ContinuousClock()
            let start = clock.now
            let results =
                switch sender {
                case .sockets: try await SocketSenders(url: url, path: "/notifications").post(payloads, senders: senders)
                case .asyncHTTPClient: try await post(payloads, senders: senders, to: url, with: client)
                }
            let elapsed = clock.now - start
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            let senderCPU = cpuAtStart.distance(to: processCPUSeconds())
            let sorted = results.latencies.sorted()
            func percentile(_ share: Double) -> Double {
                let latency = sorted[min(sorted.count - 1, Int(Double(sorted.count) * share))]
                return Double(latency.components.seconds) * 1000 + Double(latency.components.attoseconds) / 1e15
            }
            print(
                String(
                    format:
                        "  posted %d notifications from %d senders in %.2f s = %.0f notifications/s; latency p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max %.1f ms",
                    payloads.count, senders, seconds, Double(payloads.count) / seconds, percentile(0.5), percentile(0.9), percentile(0.99),
                    percentile(1.0)))
            let failures = Dictionary(grouping: results.failures, by: { $0 }).mapValues(\.count)
            print("  answered other than 200: \(results.failures.count)\(failures.isEmpty ? "" : " \(failures)")")
            print(
                "  the senders (\(sender.rawValue))"
                    + String(format: " used %.1f s of CPU (%.0f µs per notification)", senderCPU, senderCPU / Double(payloads.count) * 1e6))
            print("notifications posted: \(payloads.count)")
        }
    }

    /// Every notification of a seeded world (the mock's scenario, certificates as large as Apple's),
    /// in history order as Apple would have delivered them, and a verifier trusting its root;
    /// `root.pem`, `reconciler.env` and `reconciler.yaml` for serve are written to `credentials`.
    static func world(customers: Int, seed: UInt64, credentials: String) async throws -> ([String], SignedDataVerifier) {
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let scenario = ScenarioConfiguration(seed: seed, customers: customers, now: now, span: 30 * 86_400_000)
        let configuration = MockAppStore.Configuration(scenario: scenario, credentialsDirectory: credentials, appleSizedCertificates: true)
        return try await MockAppStore.withRunning(configuration) { mock, baseURL in
            var payloads: [String] = []
            let client = mock.client(baseURL: baseURL, requestsPerSecond: 100_000)
            for try await page in client.notificationHistory(.init(startDate: scenario.start - 60_000, endDate: now + 60_000)) {
                payloads += page.items.compactMap(\.signedPayload)
            }
            return (payloads, try mock.verifier())
        }
    }

    /// Waits until `url` answers 200 (serve migrates or checks the schema before it listens); a
    /// minute at most.
    static func waitUntilAnswering(_ url: String, headers: [(String, String)] = [], with client: HTTPClient) async throws {
        for attempt in 0... {
            var request = HTTPClientRequest(url: url)
            request.method = .GET
            for (name, value) in headers { request.headers.add(name: name, value: value) }
            if let response = try? await client.execute(request, timeout: .seconds(2)), response.status == .ok { break }
            guard attempt < 600 else { throw ValidationError("serve did not answer \(url)") }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    /// Posts each payload once from `senders` tasks sharing AsyncHTTPClient's pool (the senders of
    /// the figures before 2026-11-28); every answer's latency and the reason of each that was not a 200.
    static func post(
        _ payloads: [String], senders: Int, to url: String, with client: HTTPClient
    ) async throws -> (latencies: [Duration], failures: [String]) {
        let next = Locked(0)
        let clock = ContinuousClock()
        return try await withThrowingTaskGroup(of: (latencies: [Duration], failures: [String]).self) { group in
            for _ in 0..<senders {
                group.addTask {
                    var latencies: [Duration] = []
                    var failures: [String] = []
                    while true {
                        let index = next.withLock { value in
                            defer { value += 1 }
                            return value
                        }
                        guard index < payloads.count else { break }
                        var request = HTTPClientRequest(url: "\(url)/notifications")
                        request.method = .POST
                        request.headers.add(name: "Content-Type", value: "application/json")
                        request.body = .bytes(ByteBuffer(string: "{\"signedPayload\":\"\(payloads[index])\"}"))
                        let sent = clock.now
                        do {
                            let response = try await client.execute(request, timeout: .seconds(30))
                            _ = try await response.body.collect(upTo: 1 << 16)
                            latencies.append(clock.now - sent)
                            if response.status != .ok { failures.append("HTTP \(response.status.code)") }
                        } catch {
                            latencies.append(clock.now - sent)
                            failures.append("\(error)")
                        }
                    }
                    return (latencies, failures)
                }
            }
            var all: (latencies: [Duration], failures: [String]) = ([], [])
            for try await result in group {
                all.latencies += result.latencies
                all.failures += result.failures
            }
            return all
        }
    }
}
