import ArgumentParser
import AsyncHTTPClient
import Foundation
import MockAppStore
import ReconcilerDomain

/// `reconciler-bench app-api`: stored reads of the app API (`GET /v1/purchases`) at a fixed rate,
/// alone and beside the live webhook. Signs a world's notifications as `webhook` does, waits until
/// `serve` answers `/health` and the app API, posts the first notifications to the webhook as fast
/// as it takes them (the stored state the reads find), then runs each phase open-loop: reads of
/// random stored customers (by `originalTransactionId`) due at `rate` per second, and the rest of
/// the notifications posted to the webhook at `webhook-rate` per second at the same time, whatever
/// the answers' speed. Prints each phase's achieved rates, latency percentiles (from when each
/// request was due) and what was not answered 200.
struct AppAPIBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "app-api",
        abstract: "Read stored purchases from serve's app API at a fixed rate, alone and beside the webhook (jobs/dev/benchmark app-api).")

    @Option(help: "The webhook, e.g. http://127.0.0.1:8080 (POST /notifications, GET /health).") var url: String
    @Option(help: "The app API, e.g. http://127.0.0.1:8081 (GET /v1/purchases).") var apiUrl: String
    @Option(help: "The app API's token file (its first token is sent).") var tokenFile: String
    @Option(help: "Customers of the scenario that produces the notifications.") var customers: Int = 3000
    @Option(help: "Where to write root.pem, reconciler.env and reconciler.yaml for serve.") var credentialsDir: String
    @Option(help: "Scenario seed.") var seed: UInt64 = 101
    @Option(
        parsing: .upToNextOption,
        help: "Phases, each READS:NOTIFICATIONS per second (0: no webhook traffic), one after the other.")
    var phases: [String] = ["1000:0", "500:200"]
    @Option(help: "Seconds each phase lasts.") var seconds: Double = 30
    @Option(help: "Connections (a thread each) the reads may use at once; the webhook's get a quarter as many.")
    var connections: Int = 32
    @Option(help: "A file holding serve's process ID, read once serve answers: each phase prints serve's CPU.")
    var servePidFile: String?
    @Option(
        help: ArgumentHelp(
            "A program run before and after each phase as `PROGRAM start PHASE` and `PROGRAM end PHASE REQUESTS` (its output printed with the bench's): what the script measures per phase (PostgreSQL's CPU and statements, a profile of serve)."
        ))
    var phaseHook: String?

    func run() async throws {
        let phases = try self.phases.map { text in
            let parts = text.split(separator: ":").map { Double($0) }
            guard parts.count == 2, let reads = parts[0], let notifications = parts[1], reads > 0, notifications >= 0 else {
                throw ValidationError("a phase is READS:NOTIFICATIONS per second, e.g. 500:200, not \(text)")
            }
            return (reads: reads, notifications: notifications)
        }
        let (url, apiURL, tokenFile, customers, credentials, seed, seconds, connections, servePidFile, phaseHook) = (
            self.url, self.apiUrl, self.tokenFile, self.customers, self.credentialsDir, self.seed, self.seconds, self.connections,
            self.servePidFile, self.phaseHook
        )
        try await Task.detached {
            let (payloads, _) = try await WebhookBenchmark.world(customers: customers, seed: seed, credentials: credentials)
            let live = phases.map { Int(($0.notifications * seconds).rounded()) }
            let seeded = payloads.count - live.reduce(0, +)
            guard seeded > 0 else {
                throw ValidationError("the phases' webhook traffic needs \(live.reduce(0, +)) notifications; the world has \(payloads.count)")
            }
            print(
                "app-api: \(payloads.count) notifications of \(customers) customers: the first \(seeded) stored before the reads,"
                    + " the rest posted during them")
            FileHandle.standardOutput.write(Data("  credentials written; waiting for serve\n".utf8))
            let environment = try String(contentsOfFile: "\(credentials)/reconciler.env", encoding: .utf8)
            guard let bundleId = Self.value(of: "APP_STORE_BUNDLE_ID", in: environment) else {
                throw ValidationError("no APP_STORE_BUNDLE_ID in \(credentials)/reconciler.env")
            }
            let client = HTTPClient(eventLoopGroupProvider: .singleton)
            defer { Task { try? await client.shutdown() } }
            try await WebhookBenchmark.waitUntilAnswering("\(url)/health", with: client)
            // The token is read once serve is up (the script writes the file beside serve's configuration).
            let tokens = try String(contentsOfFile: tokenFile, encoding: .utf8).split(separator: "\n")
                .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty && !$0.hasPrefix("#") }
            guard let token = tokens.first else { throw ValidationError("no token in \(tokenFile)") }
            let authorization = [("Authorization", "Bearer \(token)")]
            try await WebhookBenchmark.waitUntilAnswering("\(apiURL)/v1/openapi.json", headers: authorization, with: client)
            let servePid = servePidFile.flatMap { try? String(contentsOfFile: $0, encoding: .utf8) }
                .flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }

            let webhook = try SocketSenders(url: url, path: "/notifications")
            let (stored, seedSeconds) = await elapsed { await webhook.post(Array(payloads.prefix(seeded)), senders: 16) }
            print(
                String(
                    format: "  stored: %d notifications posted in %.1f s, %d answered other than 200", seeded, seedSeconds,
                    stored.failures.count))
            // The customers the reads ask for: every original transaction the stored notifications name.
            let keys = Array(Set(payloads.prefix(seeded).compactMap(Self.originalTransactionId))).sorted()
            guard !keys.isEmpty else { throw ValidationError("no originalTransactionId in the stored notifications") }
            let api = try SocketSenders(url: apiURL, path: "/v1/purchases")
            var rng = SeededGenerator(seed: seed)
            var offset = seeded
            for (phase, ((reads, notifications), count)) in zip(phases, live).enumerated() {
                let reading = (0..<Int((reads * seconds).rounded())).map { _ in
                    api.getRequest(
                        query: "bundleId=\(bundleId)&environment=production&originalTransactionId=\(keys.randomElement(using: &rng)!)",
                        headers: authorization)
                }
                let posting = Array(payloads[offset..<(offset + count)])
                offset += count
                try Self.runHook(phaseHook, "start", phase: phase + 1)
                let serveCPUBefore = servePid.flatMap(Self.cpuSeconds(of:))
                let benchCPUBefore = processCPUSeconds()
                let load = (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").prefix(3).joined(separator: " ")
                async let readResult = api.paced(count: reading.count, perSecond: reads, connections: connections) { reading[$0] }
                async let postResult =
                    count == 0
                    ? PacedResult()
                    : webhook.paced(count: count, perSecond: notifications, connections: max(4, connections / 4)) { index in
                        var request: [UInt8] = []
                        webhook.postRequest(carrying: posting[index], into: &request)
                        return request
                    }
                let (read, posted) = await (readResult, postResult)
                let (serveCPUAfter, benchCPU) = (servePid.flatMap(Self.cpuSeconds(of:)), processCPUSeconds() - benchCPUBefore)
                print(
                    String(format: "phase: reads %.0f/s", reads)
                        + (count == 0 ? " alone" : String(format: " beside the webhook at %.0f/s", notifications))
                        + String(format: ", %.0f s", seconds) + " (load average at the start \(load ?? "?"))")
                print(Self.line("reads (GET /v1/purchases)", read))
                if count > 0 { print(Self.line("webhook (POST /notifications)", posted)) }
                let requests = Double(read.latencies.count + posted.latencies.count)
                if let before = serveCPUBefore, let after = serveCPUAfter {
                    print(
                        String(
                            format: "  serve used %.1f s of CPU in the phase = %.0f µs per request (%.0f%% of one core)", after - before,
                            (after - before) / requests * 1e6, (after - before) / seconds * 100))
                }
                // The bench's own share of the two cores (its senders' threads; the world was signed before).
                print(
                    String(
                        format: "  the bench used %.1f s of CPU in the phase = %.0f µs per request (%.0f%% of one core)", benchCPU,
                        benchCPU / requests * 1e6, benchCPU / seconds * 100))
                try Self.runHook(phaseHook, "end", phase: phase + 1, requests: Int(requests))
            }
        }.value
    }

    /// Runs the phase hook (if any) as `hook start PHASE` or `hook end PHASE REQUESTS` (the phase's
    /// reads and posts) and waits for it; its output joins the bench's.
    static func runHook(_ hook: String?, _ moment: String, phase: Int, requests: Int? = nil) throws {
        guard let hook else { return }
        fflush(nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: hook)
        process.arguments = [moment, String(phase)] + (requests.map { [String($0)] } ?? [])
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw ValidationError("the phase hook \(hook) \(moment) \(phase) exited \(process.terminationStatus)")
        }
    }

    /// The CPU seconds (user + system) a process has used so far (`/proc/PID/stat`), if it runs.
    static func cpuSeconds(of pid: Int) -> Double? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let end = text.lastIndex(of: ")") else {
            return nil
        }
        // After the command's closing parenthesis: state is field 3, utime 14 and stime 15.
        let fields = text[text.index(after: end)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// `KEY=value` from an environment file.
    static func value(of key: String, in file: String) -> String? {
        file.split(separator: "\n").first { $0.hasPrefix("\(key)=") }.map { String($0.dropFirst(key.count + 1)) }
    }

    /// The original transaction a signed notification is about (its payload's
    /// `data.signedTransactionInfo`), read without verifying (serve verified it).
    static func originalTransactionId(ofNotification jws: String) -> String? {
        guard let data = jwsPayload(jws)?["data"] as? [String: Any], let transaction = data["signedTransactionInfo"] as? String else {
            return nil
        }
        return jwsPayload(transaction)?["originalTransactionId"] as? String
    }

    private static func jwsPayload(_ jws: String) -> [String: Any]? {
        let parts = jws.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        var base64 = parts[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        guard let bytes = Data(base64Encoded: base64) else { return nil }
        return (try? JSONSerialization.jsonObject(with: bytes)) as? [String: Any]
    }

    static func line(_ what: String, _ result: PacedResult) -> String {
        let failures = Dictionary(grouping: result.failures, by: { $0 }).mapValues(\.count)
        return "  \(what): "
            + String(
                format: "%d in %.2f s = %.0f/s achieved; latency from when due p50 %.1f ms, p99 %.1f ms, max %.1f ms; %d sent over 1 ms late",
                result.latencies.count, result.seconds, Double(result.latencies.count) / result.seconds, result.percentile(0.5),
                result.percentile(0.99), result.percentile(1.0), result.late)
            + "; errors (other than 200): \(result.failures.count)\(failures.isEmpty ? "" : " \(failures)")"
    }
}
