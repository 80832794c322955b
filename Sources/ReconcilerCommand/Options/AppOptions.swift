import AppStoreServer
import ArgumentParser
import Foundation
import ReconcilerConfiguration
import ReconcilerDomain
import ReconcilerShared
import X509

/// Which apps and environments a command works on, and which roots their signed data must chain
/// to: every app and environment of the configuration file (`--config`, RECONCILER_CONFIG), or the
/// one app the `APP_STORE_*` variables name, narrowed by `--app` and `--environment`.
struct AppOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "The configuration file: every app and environment this deployment serves (env RECONCILER_CONFIG; without one, the APP_STORE_* variables name one app).",
            valueName: "file"))
    var config: String?

    @Option(name: .long, help: ArgumentHelp("Only this app of the configuration (its bundle id).", valueName: "bundle-id"))
    var app: String?

    @Option(name: .long, help: ArgumentHelp("The app's bundle id, without a configuration file (env APP_STORE_BUNDLE_ID).", valueName: "id"))
    var bundleId: String?

    @Option(name: .long, help: ArgumentHelp("The app's Apple ID, required in production (env APP_STORE_APP_APPLE_ID).", valueName: "id"))
    var appAppleId: Int64?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "production or sandbox: only this environment of the configuration; without a file, the one environment (env APP_STORE_ENVIRONMENT, default production).",
            valueName: "env"), transform: AppOptions.environmentArgument)
    var environment: AppStoreEnvironment?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Trusted root certificates, PEM or DER files or directories, comma-separated (env APP_STORE_ROOT_CERTIFICATES; default: the bundled Apple Root CA - G3).",
            valueName: "paths"))
    var rootCertificates: String?

    /// The configuration file's path, if one is given.
    var configurationFile: String? { config ?? Env.value("RECONCILER_CONFIG") }

    static func environment(named value: String) throws -> AppStoreEnvironment {
        switch value.lowercased() {
        case "production": return .production
        case "sandbox": return .sandbox
        default: throw ReconcilerError.configuration("unknown environment \(value): use production or sandbox")
        }
    }

    /// `--environment`'s value, refused as usage when it names neither environment.
    static func environmentArgument(_ text: String) throws -> AppStoreEnvironment {
        do {
            return try environment(named: text)
        } catch {
            throw ValidationError("unknown environment \(text): use production or sandbox")
        }
    }

    var resolvedEnvironment: AppStoreEnvironment {
        get throws { try environment ?? Self.environment(named: Env.value("APP_STORE_ENVIRONMENT") ?? "production") }
    }

    var resolvedBundleId: String? { bundleId ?? Env.value("APP_STORE_BUNDLE_ID") }

    func resolvedAppAppleId() throws -> Int64? {
        if let appAppleId { return appAppleId }
        guard let value = Env.value("APP_STORE_APP_APPLE_ID") else { return nil }
        guard let id = Int64(value) else { throw ReconcilerError.configuration("APP_STORE_APP_APPLE_ID must be a number, got \(value)") }
        return id
    }

    /// Every app and environment configured, before `--app` and `--environment` narrow them: the
    /// file's, or the one app of the environment variables (`key` comes from ``APIOptions``, which
    /// only commands that call Apple need).
    func configuration(
        key: ReconcilerConfiguration.APIKey? = nil, apiBaseURL: String? = nil, requireAppAppleId: Bool = true
    ) throws -> ReconcilerConfiguration {
        if let file = configurationFile {
            guard bundleId == nil, appAppleId == nil else {
                throw ReconcilerError.configuration(
                    "--bundle-id and --app-apple-id go without a configuration file; \(file) names the apps (use --app)")
            }
            do {
                var configuration = try ReconcilerConfiguration.load(file: file)
                if let rootCertificates {
                    configuration.rootCertificates = Self.paths(rootCertificates)
                    for index in configuration.targets.indices {
                        configuration.targets[index].origins.rootCertificates = .named("--root-certificates")
                    }
                }
                return configuration
            }
        }
        guard let bundleId = resolvedBundleId else {
            throw ReconcilerError.configuration(
                "no app: give a configuration file (--config, RECONCILER_CONFIG), or set APP_STORE_BUNDLE_ID (or --bundle-id)")
        }
        let environment = try resolvedEnvironment
        let appAppleId = try resolvedAppAppleId()
        if requireAppAppleId, environment == .production, appAppleId == nil {
            throw ReconcilerError.configuration(
                "production needs the app's Apple ID: set APP_STORE_APP_APPLE_ID or --app-apple-id (or use --environment sandbox)")
        }
        // The flag where one was given, else its variable: the hints name what set it.
        let origins = SettingOrigins(
            bundleId: .named(self.bundleId == nil ? "APP_STORE_BUNDLE_ID" : "--bundle-id"),
            appAppleId: .named(self.appAppleId == nil ? "APP_STORE_APP_APPLE_ID" : "--app-apple-id"),
            environment: .named(self.environment == nil ? "APP_STORE_ENVIRONMENT" : "--environment"),
            keyId: .named("APP_STORE_KEY_ID"), issuerId: .named("APP_STORE_ISSUER_ID"), privateKeyPath: .named("APP_STORE_PRIVATE_KEY_PATH"),
            rootCertificates: .named(
                self.rootCertificates != nil
                    ? "--root-certificates"
                    : Env.value("APP_STORE_ROOT_CERTIFICATES") != nil ? "APP_STORE_ROOT_CERTIFICATES" : "the bundled Apple Root CA - G3"))
        let target = ReconcilerConfiguration.Target(
            app: AppTarget(bundleId: bundleId, environment: environment, appAppleId: appAppleId), key: key, origins: origins,
            apiBaseURL: apiBaseURL,
            entitlement: try EntitlementOptions.policy(), forwardTo: [], consumption: try ConsumptionOptions.settings())
        return ReconcilerConfiguration(
            targets: [target], rootCertificates: (rootCertificates ?? Env.value("APP_STORE_ROOT_CERTIFICATES")).map(Self.paths),
            source: "the environment (APP_STORE_*)")
    }

    /// The apps and environments this command works on: `--app` and `--environment` narrow the
    /// configuration's (without a file, `--environment` is the one app's environment).
    func targets(
        key: ReconcilerConfiguration.APIKey? = nil, apiBaseURL: String? = nil, requireAppAppleId: Bool = true
    ) throws -> [ReconcilerConfiguration.Target] {
        try targets(in: try configuration(key: key, apiBaseURL: apiBaseURL, requireAppAppleId: requireAppAppleId))
    }

    /// The targets of an already loaded configuration that `--app` and `--environment` leave.
    func targets(in configuration: ReconcilerConfiguration) throws -> [ReconcilerConfiguration.Target] {
        let environment = configurationFile == nil ? nil : self.environment
        do {
            return try configuration.targets(app: app, environment: environment)
        }
    }

    /// What a command that only reads the database covers (`status`, `export`, `changes`,
    /// `rejections`): the apps and environments ``targets(key:apiBaseURL:requireAppAppleId:)``
    /// names (an app in production needs no Apple ID here: nothing is verified), or, when nothing
    /// names an app (no configuration file, no APP_STORE_BUNDLE_ID or --bundle-id), every app and
    /// environment the database holds, as these commands read it before there were several.
    func storedScope() throws -> StoredScope {
        guard configurationFile != nil || resolvedBundleId != nil else {
            return StoredScope(targets: nil, environment: environment)
        }
        return StoredScope(targets: try targets(requireAppAppleId: false), environment: nil)
    }

    static func paths(_ list: String) -> [String] {
        list.split(whereSeparator: { $0 == "," || $0 == ":" }).map { $0.trimmingCharacters(in: .whitespaces) }
    }

    func roots(_ paths: [String]?) throws -> [Certificate] {
        guard let paths else { return [TrustedRoots.appleRootCAG3] }
        do {
            return try TrustedRoots.load(paths: paths)
        } catch {
            throw ReconcilerError.configuration("root certificates (\(paths.joined(separator: ", "))): \(error)")
        }
    }

    /// The configuration (read once), the targets `--app` and `--environment` leave of it and
    /// their verifiers: commands that verify without calling Apple (`serve`, `inspect`).
    func verifyingTargets() throws -> (
        configuration: ReconcilerConfiguration, targets: [ReconcilerConfiguration.Target], verifiers: [SignedDataVerifier]
    ) {
        let configuration = try configuration()
        let targets = try targets(in: configuration)
        return (configuration, targets, try verifiers(for: targets, roots: configuration.rootCertificates))
    }

    /// One verifier per target, sharing one cache of verified chains.
    func verifiers(for targets: [ReconcilerConfiguration.Target], roots paths: [String]?) throws -> [SignedDataVerifier] {
        guard let first = targets.first else { return [] }
        do {
            let base = try SignedDataVerifier(
                configuration: .init(
                    rootCertificates: try roots(paths), bundleId: first.app.bundleId, appAppleId: first.app.appAppleId,
                    environment: first.app.environment))
            return try targets.map { try base.verifier(for: $0.app) }
        } catch let error as SignedDataVerifier.ConfigurationError {
            throw ReconcilerError.configuration(error.description)
        }
    }
}

/// The apps and environments a command that only reads the database covers (``AppOptions/storedScope()``).
struct StoredScope {
    /// Each app and environment with what the configuration says of it (its entitlement rule, its
    /// webhook); `nil` when nothing names an app: every app and environment the database holds.
    var targets: [ReconcilerConfiguration.Target]?
    /// With no app named: only this environment's rows (`--environment`), when given.
    var environment: AppStoreEnvironment?

    /// The apps and environments, `nil` for every one the database holds.
    var apps: [AppTarget]? { targets?.map(\.app) }

    /// Whether the output has a section per app and environment.
    var several: Bool { (targets?.count ?? 0) > 1 }

    /// The apps and environments of a command that filters by app only: `--environment` without
    /// an app named is refused rather than ignored.
    func appsOnly() throws -> [AppTarget]? {
        if targets == nil, environment != nil {
            throw ReconcilerError.configuration(
                "--environment chooses among the configured apps: give a configuration file (--config, RECONCILER_CONFIG) or APP_STORE_BUNDLE_ID")
        }
        return apps
    }
}
