import ArgumentParser
import Forwarder
import Foundation
import Reconciler
import ReconcilerDomain
import ReconcilerShared
import ReconcilerStore

/// How notifications are delivered to the app's own webhook (`run`, `serve`, `forward`).
struct ForwardingOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "A file holding the shared secret that signs each delivery's Reconciler-Signature header (env RECONCILER_FORWARD_SECRET holds the secret itself).",
            valueName: "path"))
    var forwardSecretFile: String?

    @Option(name: .long, help: ArgumentHelp("Deliveries in flight at once.", valueName: "n"))
    var forwardConcurrency: Int = 4

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Deliveries this process starts per second at most (default: no limit); per process, so divide the app's limit among the forwarders.",
            valueName: "n"))
    var forwardRate: Double?

    @Option(name: .long, help: ArgumentHelp("How long the app's webhook may take to answer.", valueName: "duration"))
    var forwardTimeout: Duration = .seconds(10)

    @Option(name: .long, help: ArgumentHelp("Tries per delivery before it is marked failed.", valueName: "n"))
    var forwardAttempts: Int = 12

    @Option(name: .long, help: ArgumentHelp("The first retry's delay; each further one doubles, up to 1h.", valueName: "duration"))
    var forwardBackoff: Duration = .seconds(5)

    func validate() throws {
        guard forwardConcurrency >= 1 else { throw ValidationError("--forward-concurrency must be at least 1") }
        guard forwardAttempts >= 1 else { throw ValidationError("--forward-attempts must be at least 1") }
        if let forwardRate, forwardRate <= 0 { throw ValidationError("--forward-rate must be more than 0") }
    }

    /// The forwarder's configuration for `url`; the secret is read here and never printed.
    func configuration(url: ForwardingURL) throws -> Forwarder.Configuration {
        guard forwardTimeout >= .milliseconds(100) else {
            throw ReconcilerError.configuration("--forward-timeout: \(forwardTimeout.operatorText) is shorter than 100ms")
        }
        guard forwardBackoff >= .milliseconds(10) else {
            throw ReconcilerError.configuration("--forward-backoff: \(forwardBackoff.operatorText) is shorter than 10ms")
        }
        return Forwarder.Configuration(
            url: url, concurrency: forwardConcurrency, requestsPerSecond: forwardRate, timeout: forwardTimeout,
            maximumAttempts: forwardAttempts,
            initialBackoff: forwardBackoff, secret: try secret())
    }

    private func secret() throws -> ForwardingSecret? {
        if let forwardSecretFile {
            guard let text = try? String(contentsOfFile: forwardSecretFile, encoding: .utf8) else {
                throw ReconcilerError.configuration("--forward-secret-file: cannot read \(forwardSecretFile)")
            }
            let secret = text.trimmingCharacters(in: .whitespacesAndNewlines)
            guard !secret.isEmpty else { throw ReconcilerError.configuration("--forward-secret-file: \(forwardSecretFile) is empty") }
            return ForwardingSecret(secret)
        }
        return Env.value("RECONCILER_FORWARD_SECRET").map(ForwardingSecret.init)
    }

    /// The app's webhook URL from `--forward-to` or RECONCILER_FORWARD_TO, checked: http or https
    /// with a host. `nil` when neither is set. It prints redacted; the queue keeps its target only.
    static func target(_ option: String?) throws -> ForwardingURL? {
        guard let url = option ?? Env.value("RECONCILER_FORWARD_TO") else { return nil }
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(), ["http", "https"].contains(scheme),
            let host = components.host, !host.isEmpty
        else {
            throw ReconcilerError.configuration(
                "--forward-to: \(ForwardingTarget.redact(url)) is not an http(s) URL such as https://app.example.com/apple/notifications")
        }
        return ForwardingURL(url)
    }
}
