import AppStoreServer
import ArgumentParser
import Forwarder
import Foundation
import Reconciler
import ReconcilerConfiguration
import ReconcilerDomain
import ReconcilerShared
import ReconcilerStore

/// How notifications are delivered to the app's own webhook (`serve`, `run`, `repair`, `forward`).
struct ForwardingOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "A file holding the shared secret that signs each delivery to --forward-to (or a forwardTo given as a plain URL) in its Reconciler-Signature header (env RECONCILER_FORWARD_SECRET holds the secret itself).",
            valueName: "path"))
    var forwardSecretFile: String?

    @Flag(
        name: .long,
        help: ArgumentHelp(
            "Deliver to --forward-to (or a forwardTo given as a plain URL) without a Reconciler-Signature header, for a handler that checks nothing but Apple's signature (env RECONCILER_FORWARD_UNSIGNED=1); without it and without a secret, forwarding is refused."
        ))
    var forwardUnsigned = false

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

    /// The forwarder's configuration for `webhook`, signed with its secret (none when it is unsigned).
    func configuration(for webhook: ForwardingWebhook) throws -> Forwarder.Configuration {
        guard forwardTimeout >= .milliseconds(100) else {
            throw ReconcilerError.configuration("--forward-timeout: \(forwardTimeout.operatorText) is shorter than 100ms")
        }
        guard forwardBackoff >= .milliseconds(10) else {
            throw ReconcilerError.configuration("--forward-backoff: \(forwardBackoff.operatorText) is shorter than 10ms")
        }
        return Forwarder.Configuration(
            url: webhook.url, concurrency: forwardConcurrency, requestsPerSecond: forwardRate, timeout: forwardTimeout,
            maximumAttempts: forwardAttempts, initialBackoff: forwardBackoff, secret: webhook.secret)
    }

    /// One forwarder configuration per distinct webhook of `plan`, each knowing the others
    /// (``Forwarder/Configuration/companionTargets``).
    func configurations(for plan: ForwardingPlan) throws -> [Forwarder.Configuration] {
        let companions = Set(plan.distinct.map(\.url.target.id))
        return try plan.distinct.map { webhook in
            var configuration = try configuration(for: webhook)
            configuration.companionTargets = companions
            return configuration
        }
    }

    // MARK: Where each app forwards

    /// Where each of `targets` forwards its notifications, by the one rule every forwarding
    /// command (`serve`, `run`, `repair`, `forward`) checks at start, before it touches anything:
    ///
    /// - A process-wide URL (`--forward-to`, else RECONCILER_FORWARD_TO) sends every app's
    ///   notifications to it, when the configuration has no `forwardTo`; together with any
    ///   `forwardTo` of the file (whichever apps `--app` chooses) it is refused, naming both, so a
    ///   leftover variable cannot send one app's notifications to another's handler.
    /// - Otherwise each app's `forwardTo` (``ForwardingDestination``): its URL and its secret are
    ///   read from where the file says.
    /// - Every webhook is signed: the mapping form with its own secret; the process-wide URL and a
    ///   plain `forwardTo` URL with the process's secret (`--forward-secret-file`, else
    ///   RECONCILER_FORWARD_SECRET). Unsigned only when marked: `unsigned: true`, or
    ///   `--forward-unsigned` (RECONCILER_FORWARD_UNSIGNED) for the process's. A process secret (or
    ///   `--forward-unsigned`) that no webhook would use is refused too, as is one URL with two
    ///   secrets among the targets (its deliveries are signed by one forwarder).
    ///
    /// `configuration` is `nil` for a command given no app (`forward` with only a URL).
    /// Errors name each URL in its redacted form and where it came from, never a secret.
    func plan(
        forwardTo option: String?, configuration: ReconcilerConfiguration?, targets: [ReconcilerConfiguration.Target]
    ) throws
        -> ForwardingPlan
    {
        let processURL = try Self.processWideURL(option)
        let inFile = (configuration?.targets ?? []).flatMap(\.forwardTo).reduce(into: [ForwardingDestination]()) { list, destination in
            if !list.contains(destination) { list.append(destination) }
        }
        if let processURL, let first = inFile.first, let configuration {
            let url = (try? Self.url(of: first, in: configuration.source)).map { "\($0)" } ?? "read from \(first.url)"
            let more = inFile.count > 1 ? " (and \(inFile.count - 1) more forwardTo)" : ""
            throw ReconcilerError.configuration(
                "\(processURL.origin) (\(processURL.url)) and \(first.key) in \(configuration.source) (\(url))\(more) both say where to "
                    + "forward notifications; \(processURL.origin) would send every app's to one URL. Remove "
                    + (processURL.origin == "--forward-to" ? "--forward-to" : "RECONCILER_FORWARD_TO from the environment")
                    + " to forward each app to its own forwardTo, or remove forwardTo from \(configuration.source)")
        }
        let processSigning = try processURL != nil || !inFile.isEmpty ? self.processSigning() : nil
        if let processURL {
            guard let processSigning else { throw Self.unsigned(processURL.origin, processURL.url, configuration: nil) }
            return ForwardingPlan(processWide: ForwardingWebhook(url: processURL.url, secret: processSigning.secret, origin: processURL.origin))
        }
        guard let configuration, !inFile.isEmpty else { return ForwardingPlan() }
        if let processSigning, !inFile.contains(where: { $0.signing == .process }) {
            throw ReconcilerError.configuration(
                "\(processSigning.origin) would sign nothing: every forwardTo in \(configuration.source) says how its deliveries are "
                    + "signed (secretFile, secretEnv or unsigned: true); remove \(processSigning.origin)")
        }
        var webhooks: [AppTarget: [ForwardingWebhook]] = [:]
        var resolved: [ForwardingDestination: ForwardingWebhook] = [:]
        for target in targets {
            for destination in target.forwardTo {
                webhooks[target.app, default: []].append(
                    try webhook(destination, resolved: &resolved, processSigning: processSigning, in: configuration))
            }
        }
        return ForwardingPlan(perApp: webhooks, order: targets.map(\.app))
    }

    /// The webhook of `destination`: its URL and secret read from where the file says, once per
    /// destination (`resolved`); one URL signed two ways is refused.
    private func webhook(
        _ destination: ForwardingDestination, resolved: inout [ForwardingDestination: ForwardingWebhook],
        processSigning: (secret: ForwardingSecret?, origin: String)?, in configuration: ReconcilerConfiguration
    ) throws -> ForwardingWebhook {
        if let webhook = resolved[destination] { return webhook }
        let url = try Self.url(of: destination, in: configuration.source)
        let origin = "\(destination.key) in \(configuration.source)"
        let secret: ForwardingSecret?
        switch destination.signing {
        case .process:
            guard let processSigning else { throw Self.unsigned(origin, url, configuration: destination.key) }
            secret = processSigning.secret
        case .secret(let source):
            secret = ForwardingSecret(try Self.read(source, key: "\(destination.key).\(Self.name(of: source, secret: true))", of: origin))
        case .unsigned:
            secret = nil
        }
        let webhook = ForwardingWebhook(url: url, secret: secret, origin: origin, name: destination.name, types: destination.types)
        if let other = resolved.values.first(where: { $0.url.target.id == url.target.id && $0.secret != secret }) {
            throw ReconcilerError.configuration(
                "\(other.origin) and \(origin) forward to the same URL (\(url)) signed differently; a URL's deliveries are "
                    + "signed by one forwarder, with one secret: give both the same secret (or both unsigned: true)")
        }
        resolved[destination] = webhook
        return webhook
    }

    /// The process's own signing of the process-wide URL and plain `forwardTo` URLs: its secret
    /// (`nil` secret: `--forward-unsigned`), and where that came from; `nil` when none is given.
    private func processSigning() throws -> (secret: ForwardingSecret?, origin: String)? {
        let unsigned = forwardUnsigned ? "--forward-unsigned" : Env.flag("RECONCILER_FORWARD_UNSIGNED") ? "RECONCILER_FORWARD_UNSIGNED" : nil
        let secret: (ForwardingSecret, String)?
        if let forwardSecretFile {
            secret = (ForwardingSecret(try Self.read(.file(forwardSecretFile), key: "--forward-secret-file", of: nil)), "--forward-secret-file")
        } else if let value = Env.value("RECONCILER_FORWARD_SECRET") {
            secret = (ForwardingSecret(value), "RECONCILER_FORWARD_SECRET")
        } else {
            secret = nil
        }
        switch (secret, unsigned) {
        case (let (value, origin)?, nil): return (value, origin)
        case (nil, let origin?): return (nil, origin)
        case (let (_, secretOrigin)?, let unsignedOrigin?):
            throw ReconcilerError.configuration("\(secretOrigin) and \(unsignedOrigin) contradict each other: sign, or mark unsigned")
        case (nil, nil): return nil
        }
    }

    /// A webhook that would go out unsigned without being marked so.
    private static func unsigned(_ origin: String, _ url: ForwardingURL, configuration key: String?) -> ReconcilerError {
        .configuration(
            "\(origin) (\(url)) has no secret for the Reconciler-Signature of its deliveries: "
                + (key.map {
                    "write \($0) as a mapping with its own secret ({url, secretFile} or {url, secretEnv}) or with unsigned: true, or give "
                } ?? "give ")
                + "--forward-secret-file FILE (or RECONCILER_FORWARD_SECRET); --forward-unsigned (or RECONCILER_FORWARD_UNSIGNED=1) "
                + "forwards unsigned, for a handler that checks nothing but Apple's signature")
    }

    /// The process-wide URL, from `--forward-to` or RECONCILER_FORWARD_TO, checked; `nil` when neither is set.
    private static func processWideURL(_ option: String?) throws -> (url: ForwardingURL, origin: String)? {
        if let option { return (try url(option, origin: "--forward-to"), "--forward-to") }
        guard let value = Env.value("RECONCILER_FORWARD_TO") else { return nil }
        return (try url(value, origin: "RECONCILER_FORWARD_TO"), "RECONCILER_FORWARD_TO")
    }

    /// The URL of `destination`, read from where the file says and checked.
    private static func url(of destination: ForwardingDestination, in file: String) throws -> ForwardingURL {
        let origin = "\(destination.key) in \(file)"
        switch destination.url {
        case .inline(let text): return try url(text, origin: origin)
        case .file, .environment:
            let key = "\(destination.key).\(name(of: destination.url, secret: false))"
            return try url(try read(destination.url, key: key, of: origin), origin: "\(origin) (\(destination.url))")
        }
    }

    /// The key a source was written at: `urlFile`, `secretEnv`.
    private static func name(of source: ForwardingDestination.Source, secret: Bool) -> String {
        switch source {
        case .inline: "url"
        case .file: secret ? "secretFile" : "urlFile"
        case .environment: secret ? "secretEnv" : "urlEnv"
        }
    }

    /// A value from a file (without the whitespace around it) or an environment variable; an
    /// error names `key` and the file or variable, never what it holds.
    private static func read(_ source: ForwardingDestination.Source, key: String, of origin: String?) throws -> String {
        let value: String?
        switch source {
        case .inline(let text): value = text
        case .file(let path):
            guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
                throw ReconcilerError.configuration("\(key)\(origin.map { " (\($0))" } ?? ""): cannot read \(path)")
            }
            value = text.trimmingCharacters(in: .whitespacesAndNewlines)
        case .environment(let name): value = Env.value(name)
        }
        guard let value, !value.isEmpty else {
            throw ReconcilerError.configuration("\(key)\(origin.map { " (\($0))" } ?? ""): \(source) is empty or not set")
        }
        return value
    }

    /// The app's webhook URL, checked: http or https with a host. It prints redacted; the queue keeps its target only.
    private static func url(_ text: String, origin: String) throws -> ForwardingURL {
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased(), ["http", "https"].contains(scheme),
            let host = components.host, !host.isEmpty
        else {
            throw ReconcilerError.configuration(
                "\(origin): \(ForwardingTarget.redact(text)) is not an http(s) URL such as https://app.example.com/apple/notifications")
        }
        return ForwardingURL(text)
    }
}

/// One webhook as the forwarding commands deliver to it: its URL, the secret that signs each
/// delivery (`nil`: configured unsigned), and where it was configured.
struct ForwardingWebhook: Sendable {
    var url: ForwardingURL
    var secret: ForwardingSecret?
    /// `--forward-to`, `RECONCILER_FORWARD_TO` or `apps[0].forwardTo in FILE`, for messages.
    var origin: String
    /// The `name` of its `forwardTo` target (`forward --redeliver --target`), when it has one.
    var name: String? = nil
    /// The notification types it receives (`types`; `nil`: every one).
    var types: NotificationTypeFilter? = nil

    /// What the queue rows name: the URL's target, and the types it takes.
    var route: ForwardingRoute { ForwardingRoute(target: url.target, types: types) }
}

/// Where each app and environment of a forwarding command forwards (``ForwardingOptions/plan(forwardTo:configuration:targets:)``).
struct ForwardingPlan: Sendable {
    /// The process-wide URL (`--forward-to`, RECONCILER_FORWARD_TO): every app's webhook.
    var processWide: ForwardingWebhook?
    /// Each app and environment's own webhooks (`forwardTo`); absent: not forwarded.
    var perApp: [AppTarget: [ForwardingWebhook]] = [:]
    /// The targets in the command's order, for ``distinct``.
    var order: [AppTarget] = []

    /// The webhooks `app`'s notifications go to; empty: they are not forwarded.
    func webhooks(for app: AppTarget) -> [ForwardingWebhook] { processWide.map { [$0] } ?? perApp[app] ?? [] }

    /// Every webhook once (by its URL's id), in the targets' order: one forwarder each.
    var distinct: [ForwardingWebhook] {
        if let processWide { return [processWide] }
        return order.flatMap { perApp[$0] ?? [] }.reduce(into: [ForwardingWebhook]()) { list, webhook in
            if !list.contains(where: { $0.url.target.id == webhook.url.target.id }) { list.append(webhook) }
        }
    }
}
