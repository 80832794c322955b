package import AppStoreServer
import Foundation
import ReconcilerShared
import Synchronization

extension MockAppStore {
    /// An app the mock serves, in the environments it simulates for it (`--app BUNDLE_ID:APPLE_ID:ENVIRONMENTS`).
    ///
    /// ```swift
    /// let app = try MockAppStore.App(parsing: "com.example.one:1234567890:production,sandbox")
    /// ```
    package struct App: Sendable, Hashable {
        package var bundleId: String
        package var appAppleId: Int64
        /// Each is simulated as a world of its own, in this order (the first app's first one keeps the scenario's seed).
        package var environments: [AppStoreEnvironment]

        package init(bundleId: String, appAppleId: Int64, environments: [AppStoreEnvironment]) {
            self.bundleId = bundleId
            self.appAppleId = appAppleId
            self.environments = environments
        }

        /// Reads `BUNDLE_ID:APPLE_ID:ENVIRONMENTS`, the environments comma-separated (`production`, `sandbox`).
        package init(parsing text: String) throws {
            let parts = text.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 3 else {
                throw ConfigurationError(
                    .invalidApp, "--app \(text) is not BUNDLE_ID:APPLE_ID:ENVIRONMENTS (e.g. com.example.one:1234567890:production,sandbox)")
            }
            guard !parts[0].isEmpty, !parts[0].contains(where: \.isWhitespace) else {
                throw ConfigurationError(.invalidApp, "--app \(text): the bundle ID is empty or holds a space")
            }
            guard let appleId = Int64(parts[1]), appleId > 0 else {
                throw ConfigurationError(.invalidApp, "--app \(text): the Apple ID \(parts[1]) is not a positive number")
            }
            var environments: [AppStoreEnvironment] = []
            for name in parts[2].split(separator: ",", omittingEmptySubsequences: false) {
                switch name.lowercased() {
                case "production": environments.append(.production)
                case "sandbox": environments.append(.sandbox)
                default: throw ConfigurationError(.invalidApp, "--app \(text): \(name) is not production or sandbox")
                }
            }
            self.init(bundleId: parts[0], appAppleId: appleId, environments: environments)
        }
    }

    /// A mock configuration that cannot be served, with a message that names the setting.
    package struct ConfigurationError: Error, CustomStringConvertible, Sendable {
        package struct Code: RawRepresentable, Hashable, Sendable {
            package var rawValue: String
            package init(rawValue: String) { self.rawValue = rawValue }

            /// An `--app` that does not read, or names no environment or one twice.
            package static let invalidApp = Code(rawValue: "invalidApp")
            /// Two `--app`s with the same bundle ID.
            package static let duplicateApp = Code(rawValue: "duplicateApp")
            /// `--unauthorized-app` names an app that no `--app` names.
            package static let unknownUnauthorizedApp = Code(rawValue: "unknownUnauthorizedApp")
            /// The scale mode simulates one app in one environment.
            package static let scaleWithSeveralApps = Code(rawValue: "scaleWithSeveralApps")
        }

        package var code: Code
        package var description: String

        init(_ code: Code, _ description: String) {
            self.code = code
            self.description = description
        }
    }

    /// Where the mock listens for one environment's API (Apple has a host per environment).
    struct Listener: Sendable {
        var environment: AppStoreEnvironment
        var port: Int
    }
}

extension MockAppStore.Configuration {
    /// The apps served: ``apps``, or without them the scenario's one app in its one environment.
    var servedApps: [MockAppStore.App] {
        guard apps.isEmpty else { return apps }
        return [.init(bundleId: scenario.bundleId, appAppleId: scenario.appAppleId, environments: [scenario.environment])]
    }

    /// One listener without ``apps`` (today's mock, in the scenario's environment); with them,
    /// production on ``port`` and, when an app has the sandbox, the sandbox on ``sandboxPort``.
    var listeners: [MockAppStore.Listener] {
        guard !apps.isEmpty else { return [.init(environment: scenario.environment, port: port)] }
        var listeners = [MockAppStore.Listener(environment: .production, port: port)]
        if apps.contains(where: { $0.environments.contains(.sandbox) }) { listeners.append(.init(environment: .sandbox, port: sandboxPort)) }
        return listeners
    }

    func validate() throws {
        for app in apps {
            guard !app.environments.isEmpty, Set(app.environments).count == app.environments.count else {
                throw MockAppStore.ConfigurationError(.invalidApp, "--app \(app.bundleId) must name production, sandbox or both, each once")
            }
            guard app.environments.allSatisfy({ $0 == .production || $0 == .sandbox }), app.appAppleId > 0 else {
                throw MockAppStore.ConfigurationError(.invalidApp, "--app \(app.bundleId) needs a positive Apple ID and production or sandbox")
            }
        }
        if let duplicate = Dictionary(grouping: apps, by: \.bundleId).first(where: { $0.value.count > 1 })?.key {
            throw MockAppStore.ConfigurationError(.duplicateApp, "--app \(duplicate) is given twice: give each app once, with all its environments")
        }
        let known = Set(servedApps.map(\.bundleId))
        if let unknown = unauthorizedApps.sorted().first(where: { !known.contains($0) }) {
            throw MockAppStore.ConfigurationError(
                .unknownUnauthorizedApp,
                "--unauthorized-app \(unknown) is not an app the mock serves (name one of \(known.sorted().joined(separator: ", ")))")
        }
        if scenario.scaleNotifications != nil, servedApps.count > 1 || servedApps.contains(where: { $0.environments.count > 1 }) {
            throw MockAppStore.ConfigurationError(
                .scaleWithSeveralApps, "--scale-notifications simulates one app in one environment: give at most one --app with one environment")
        }
    }

    /// The scenario of `app` (the `index`th) in `environment`, the `world`th world simulated: the
    /// first keeps the seed and the first block of IDs, so one app is today's mock; every other
    /// world's seed comes from the seed, the app's index and the environment, and its IDs from a
    /// block of its own (or the first, with ``sharedTransactionIds``). Each world has
    /// `scenario.customers` customers; `--forged` payloads go to the first world only.
    func scenario(of app: MockAppStore.App, index: Int, environment: AppStoreEnvironment, world: Int) -> ScenarioConfiguration {
        var scenario = self.scenario
        scenario.bundleId = app.bundleId
        scenario.appAppleId = app.appAppleId
        scenario.environment = environment
        if world > 0 {
            var mixer = SeededGenerator(
                seed: scenario.seed ^ (UInt64(index + 1) &* 0x9E37_79B9_7F4A_7C15) ^ (environment == .sandbox ? 0x5A4D_B0C5_5A4D_B0C5 : 0))
            scenario.seed = mixer.next()
            scenario.forgedNotifications = 0
        }
        scenario.transactionIdBlock = sharedTransactionIds ? 0 : world
        return scenario
    }
}

extension MockAppStore {
    /// Builds every world: each served app in each of its environments, simulated in the order of
    /// ``Configuration/apps``; then, for each app, the environments the mock listens for but does
    /// not simulate for it (the app there has no purchases).
    static func worlds(_ configuration: Configuration, signer: JWSSigner) async throws -> [AppWorld] {
        var worlds: [AppWorld] = []
        for (index, app) in configuration.servedApps.enumerated() {
            for environment in app.environments {
                let scenario = configuration.scenario(of: app, index: index, environment: environment, world: worlds.count)
                worlds.append(try await AppWorld.simulate(scenario, signer: signer))
            }
        }
        for (index, app) in configuration.servedApps.enumerated() {
            for listener in configuration.listeners where !app.environments.contains(listener.environment) {
                let scenario = configuration.scenario(of: app, index: index, environment: listener.environment, world: worlds.count)
                worlds.append(try await AppWorld.empty(scenario, signer: signer))
            }
        }
        return worlds
    }

    /// The base URL of an environment's API, once the mock listens (`nil` before, or for an
    /// environment it does not serve). Production is `http://HOST:PORT`; with ``Configuration/apps``
    /// naming the sandbox, the sandbox has its own port, as Apple has a host per environment.
    package func baseURL(for environment: AppStoreEnvironment) -> String? {
        boundPorts.withLock { $0[environment] }.map { "http://\(advertisedHost):\($0)" }
    }

    /// The host a client reaches the mock at.
    var advertisedHost: String { configuration.host == "0.0.0.0" ? "127.0.0.1" : configuration.host }

    /// The apps the mock serves, as configured (one without ``Configuration/apps``).
    package var apps: [App] { configuration.servedApps }

    /// The configuration file (`reconciler --config`) that points a reconciler at this mock for
    /// every app and environment, in the format of the reconciler's README: the team key, both base
    /// URLs, the root, the apps, and the season pass's term (Apple sends no expiry for it);
    /// `rateLimit` only with ``Configuration/rateLimitPerSecond``.
    ///
    /// - Parameters:
    ///   - baseURLs: each served environment's base URL.
    ///   - directory: where `root.pem` and the key are.
    package func reconcilerConfigurationYAML(baseURLs: [AppStoreEnvironment: String], directory: String) -> String {
        func environments(_ list: [AppStoreEnvironment]) -> String {
            "[" + list.map { $0 == .sandbox ? "sandbox" : "production" }.joined(separator: ", ") + "]"
        }
        let served = configuration.listeners.map(\.environment).sorted { $0 == .production && $1 != .production }
        var lines = [
            "# Written by mock-appstore: every app and environment it serves (reconciler --config FILE).",
            "key:",
            "  id: \(YAMLText.scalar(configuration.keyId))",
            "  issuer: \(YAMLText.scalar(configuration.issuerId))",
            "  privateKeyPath: \(YAMLText.scalar("\(directory)/AuthKey_\(configuration.keyId).p8"))",
            "apiBaseURL:",
        ]
        for environment in served {
            guard let url = baseURLs[environment] else { continue }
            lines.append("  \(environment == .sandbox ? "sandbox" : "production"): \(YAMLText.scalar(url))")
        }
        lines.append("rootCertificates: [\(YAMLText.scalar("\(directory)/root.pem"))]")
        if let limit = configuration.rateLimitPerSecond {
            let value = YAMLText.number(limit)
            lines.append("rateLimit: {" + served.map { "\($0 == .sandbox ? "sandbox" : "production"): \(value)" }.joined(separator: ", ") + "}")
        }
        lines.append("apps:")
        for app in configuration.servedApps {
            lines.append("  - bundleId: \(YAMLText.scalar(app.bundleId))")
            lines.append("    appAppleId: \(app.appAppleId)")
            lines.append("    environments: \(environments(app.environments))")
        }
        // App Store Connect's notification settings, read (and fixed) by `reconciler doctor`.
        lines.append("notificationURL: \(YAMLText.scalar(configuration.webhookURL ?? MockAppStore.defaultNotificationURL))")
        if let production = baseURLs[.production] ?? baseURLs.values.first {
            lines.append("appStoreConnect:")
            lines.append("  id: \(YAMLText.scalar(MockAppStore.appStoreConnectKeyId))")
            lines.append("  issuer: \(YAMLText.scalar(configuration.issuerId))")
            lines.append("  privateKeyPath: \(YAMLText.scalar("\(directory)/AuthKey_\(MockAppStore.appStoreConnectKeyId).p8"))")
            lines.append("  baseURL: \(YAMLText.scalar(production))")
        }
        let terms = nonRenewingTerms.keys.sorted().map { "\(YAMLText.scalar($0)): \(Duration.milliseconds(nonRenewingTerms[$0]!).operatorText)" }
        lines.append("nonRenewingTerms: {\(terms.joined(separator: ", "))}")
        return lines.joined(separator: "\n") + "\n"
    }
}

/// The few YAML scalars the mock writes: plain when YAML reads them back as the same string,
/// double-quoted (JSON's escapes, which YAML shares) otherwise.
enum YAMLText {
    static func scalar(_ text: String) -> String {
        let safe = text.unicodeScalars.allSatisfy { scalar in
            CharacterSet.alphanumerics.contains(scalar) && scalar.isASCII || "._/:-".unicodeScalars.contains(scalar)
        }
        let special = ["true", "false", "yes", "no", "on", "off", "null", "~"].contains(text.lowercased())
        let numeric = Double(text) != nil || text.first == "-" || text.first == ":" || text.contains(": ")
        if safe, !text.isEmpty, !special, !numeric { return text }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        return (try? encoder.encode(text)).map { String(decoding: $0, as: UTF8.self) } ?? "\"\""
    }

    static func number(_ value: Double) -> String {
        value.rounded() == value && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }
}
