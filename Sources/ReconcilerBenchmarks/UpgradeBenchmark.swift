import AppStoreServer
import ArgumentParser
import AsyncHTTPClient
import Foundation
import MockAppStore
import NIOCore
import NIOHTTP1
import ReconcilerDomain

/// `reconciler-bench upgrade`: the live webhook's side of a rolling upgrade (`jobs/dev/benchmark
/// upgrade`). Signs a world's notifications (the mock's scenario), writes the credentials `reconciler
/// serve` needs to trust them, then, once the URL file names a `serve`, posts them at a steady rate,
/// each to the `serve` the file names at that moment (the script points it at the new binary's
/// `serve` once that answers `/health`, as a Kubernetes Service routes to a ready pod), until the
/// stop file appears. It prints what was answered, and the longest time in which no notification
/// was answered 2xx, in seconds since the UNIX epoch like the script's own marks.
struct UpgradeBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "upgrade",
        abstract: "Post notifications at a steady rate to whichever `serve` a file names, during an upgrade (jobs/dev/benchmark upgrade).")

    @Option(
        help:
            "A file holding the base URL of the serve to post to, e.g. http://127.0.0.1:8080 (read before each post; posting starts when it exists).")
    var urlFile: String
    @Option(help: "Posting stops when this file exists.") var stopFile: String
    @Option(help: "Where to write root.pem and reconciler.env for serve.") var credentialsDir: String
    @Option(help: "Notifications posted per second.") var rate: Double = 20
    @Option(help: "Most posts waiting for an answer at once (a post due while this many wait is skipped and counted).")
    var senders: Int = 64
    @Option(help: "Seconds a post waits for its answer before it counts as not answered.") var timeout: Int64 = 30
    @Option(help: "Customers of the scenario that produces the notifications (posted in turn, again from the first when all were).")
    var customers: Int = 2000
    @Option(help: "Scenario seed.") var seed: UInt64 = 103

    func run() async throws {
        let (urlFile, stopFile, credentials, rate, senders, timeout, customers, seed) = (
            self.urlFile, self.stopFile, self.credentialsDir, self.rate, self.senders, self.timeout, self.customers, self.seed
        )
        try await Task.detached {
            let payloads = try await Self.payloads(customers: customers, seed: seed, credentials: credentials)
            // The header of a JWS as the mock signs by default (its certificate chain): the
            // script's SQL gives the old schema's rows payloads of that size.
            let sample = try SigningCertificateAuthority().signer.sign(payloadJSON: Data("{}".utf8))
            try String(sample.prefix { $0 != "." }).write(toFile: "\(credentials)/mock-jws-header.txt", atomically: true, encoding: .utf8)
            FileHandle.standardOutput.write(Data("upgrade: \(payloads.count) notifications signed; credentials written\n".utf8))
            while !FileManager.default.fileExists(atPath: urlFile) { try await Task.sleep(for: .milliseconds(100)) }
            let answers = try await Self.post(
                payloads, rate: rate, senders: senders, timeout: .seconds(timeout), urlFile: urlFile, stopFile: stopFile)
            Self.report(answers, rate: rate, senders: senders)
        }.value
    }

    /// One post: when it was sent and answered (seconds since the UNIX epoch), and how.
    struct Answer: Sendable {
        var sent: Double
        var answered: Double
        /// `HTTP 200`, ..., or why there was no answer.
        var outcome: String
        var isSuccess: Bool { outcome.hasPrefix("HTTP 2") }
    }

    static func payloads(customers: Int, seed: UInt64, credentials: String) async throws -> [String] {
        try await WebhookBenchmark.world(customers: customers, seed: seed, credentials: credentials).0
    }

    /// Posts `payloads` in turn, one every 1/`rate` s, until the stop file appears; then waits for
    /// the posts still out (each at most `timeout`).
    static func post(
        _ payloads: [String], rate: Double, senders: Int, timeout: Duration, urlFile: String, stopFile: String
    ) async throws -> (answers: [Answer], skipped: Int) {
        var configuration = HTTPClient.Configuration()
        configuration.timeout = .init(connect: .seconds(5), read: .seconds(timeout.components.seconds))
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        defer { Task { try? await client.shutdown() } }
        let waiting = Locked(0)
        let clock = ContinuousClock()
        let interval = Duration.seconds(1 / rate)
        return await withTaskGroup(of: Answer.self) { group in
            var (next, skipped, due) = (0, 0, clock.now)
            while !FileManager.default.fileExists(atPath: stopFile) {
                due += interval
                try? await clock.sleep(until: due)
                guard waiting.withLock({ $0 }) < senders else {
                    skipped += 1
                    continue
                }
                let url = (try? String(contentsOfFile: urlFile, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
                let body = "{\"signedPayload\":\"\(payloads[next % payloads.count])\"}"
                next += 1
                waiting.withLock { $0 += 1 }
                group.addTask {
                    defer { waiting.withLock { $0 -= 1 } }
                    let sent = Date().timeIntervalSince1970
                    var request = HTTPClientRequest(url: "\(url)/notifications")
                    request.method = .POST
                    request.headers.add(name: "Content-Type", value: "application/json")
                    request.body = .bytes(ByteBuffer(string: body))
                    let outcome: String
                    do {
                        let response = try await client.execute(request, timeout: .seconds(timeout.components.seconds))
                        _ = try await response.body.collect(upTo: 1 << 16)
                        outcome = "HTTP \(response.status.code)"
                    } catch let error as HTTPClientError where error == .deadlineExceeded || error == .readTimeout {
                        outcome = "no answer in \(timeout.components.seconds) s"
                    } catch {
                        outcome = "no answer: \(type(of: error))"
                    }
                    return Answer(sent: sent, answered: Date().timeIntervalSince1970, outcome: outcome)
                }
            }
            var answers: [Answer] = []
            for await answer in group { answers.append(answer) }
            return (answers, skipped)
        }
    }

    static func report(_ result: (answers: [Answer], skipped: Int), rate: Double, senders: Int) {
        let answers = result.answers.sorted { $0.sent < $1.sent }
        guard let first = answers.first, let last = answers.last else {
            print("upgrade: nothing posted")
            return
        }
        let outcomes = Dictionary(grouping: answers.filter { !$0.isSuccess }, by: \.outcome).mapValues(\.count)
        let successes = answers.filter(\.isSuccess).map(\.answered).sorted()
        print(
            String(
                format: "  posted %d notifications at %.0f/s from %.3f to %.3f; answered 2xx: %d; otherwise: %@; not posted (%d posts waiting): %d",
                answers.count, rate, first.sent, last.sent, successes.count,
                outcomes.isEmpty ? "none" : outcomes.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "),
                senders, result.skipped))
        // The longest time without a 2xx answer: between two 2xx answers, or from the first post
        // to the first 2xx answer, or from the last 2xx answer to the last answer.
        let marks = [first.sent] + successes + [answers.map(\.answered).max() ?? last.sent]
        var longest = (seconds: 0.0, from: first.sent, to: first.sent)
        for (from, to) in zip(marks, marks.dropFirst()) where to - from > longest.seconds { longest = (to - from, from, to) }
        print(String(format: "longest without a 2xx answer: %.1f s, from %.3f to %.3f", longest.seconds, longest.from, longest.to))
    }
}
