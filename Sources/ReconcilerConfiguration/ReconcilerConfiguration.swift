package import AppStoreServer
import Foundation
package import ReconcilerDomain
package import ReconcilerShared
import Yams

/// Every app and environment one deployment serves, with what each needs: its In-App Purchase
/// key, API base URL, request budget and entitlement choices. It comes from the configuration file
/// (``load(file:)``), or, for one app, from the `APP_STORE_*` environment variables (the command
/// line builds that one target itself).
///
/// ```swift
/// let configuration = try ReconcilerConfiguration.load(file: "/etc/reconciler/reconciler.yaml")
/// for target in try configuration.targets(app: nil, environment: nil) { print(target.app) }
/// ```
package struct ReconcilerConfiguration: Sendable {
    /// An In-App Purchase key: the `.p8` file's path, never its contents.
    package struct APIKey: Sendable, Hashable, CustomStringConvertible {
        package var id: String
        package var issuer: String
        package var privateKeyPath: String

        package init(id: String, issuer: String, privateKeyPath: String) {
            self.id = id
            self.issuer = issuer
            self.privateKeyPath = privateKeyPath
        }

        package var description: String { "key \(id) (\(privateKeyPath))" }
    }

    /// One app in one environment, and what its processes need.
    package struct Target: Sendable, CustomStringConvertible {
        /// The app and environment with the app's rule for `entitled`: every writer of its
        /// purchases is given this, so each judges `entitled` as `export` and `serve` do.
        package let scope: AppScope
        /// The In-App Purchase key for the App Store Server API; `nil` when no key is configured
        /// (only commands that call Apple need one).
        package var key: APIKey?
        /// `nil`: Apple's host for the environment.
        package var apiBaseURL: String?
        /// The app's request budget per endpoint in this environment (requests per second); `nil`:
        /// the default (80% of Apple's limit).
        package var rateLimit: Double?
        /// The app's own webhooks and how deliveries to each are signed, when its notifications are
        /// forwarded (`forwardTo`): every target of the app's `forwardTo` that receives this
        /// environment's, each with its own queue rows (empty: not forwarded).
        package var forwardTo: [ForwardingDestination]
        /// What the deployment wants of the app's consumption requests.
        package var consumption: ConsumptionSettings
        /// Where its settings came from (the file's keys, or the variables and flags), for hints.
        package var origins: SettingOrigins
        /// The URL Apple should call for the app's notifications (this deployment's `serve`), when
        /// configured (`notificationURL`, the app's or the top level's).
        package var notificationURL: String?

        package init(
            app: AppTarget, key: APIKey?, origins: SettingOrigins, apiBaseURL: String? = nil, rateLimit: Double? = nil,
            entitlement: EntitlementPolicy = .init(), forwardTo: [ForwardingDestination] = [], consumption: ConsumptionSettings = .init()
        ) {
            self.scope = AppScope(target: app, entitlement: entitlement)
            self.key = key
            self.origins = origins
            self.apiBaseURL = apiBaseURL
            self.rateLimit = rateLimit
            self.forwardTo = forwardTo
            self.consumption = consumption
        }

        package var app: AppTarget { scope.target }
        package var entitlement: EntitlementPolicy { scope.entitlement }
        package var description: String { app.description }
    }

    package var targets: [Target]
    /// Trusted roots, PEM or DER files or directories; `nil`: the bundled Apple Root CA - G3.
    package var rootCertificates: [String]?
    /// When a customer or shard that keeps failing is given up (`nil`: the default).
    package var giveUpAfter: Int?
    /// Where it came from, for messages: the file's path, or "the environment".
    package var source: String
    /// Bundle IDs of the team's apps that no target names (`knownApps`): a genuine notification of
    /// one reaching `serve` is a configuration gap that pages, as one of a configured app in an
    /// environment not configured is; any other app's only warns.
    package var knownApps: [String] = []
    /// The app API (`appApi`), when configured: `serve` answers it on a port of its own.
    package var appApi: AppAPISettings?
    /// The app API's token file (`appApi.tokenFile`), when configured.
    package var appApiTokenFile: String? { appApi?.tokenFile }

    /// `appApi: {tokenFile, port, refreshRateLimit}`: where the app's backend asks for its
    /// customers' purchases and hands over fresh ones.
    package struct AppAPISettings: Sendable, Hashable {
        /// The port `serve` answers the app API on, when the file names none.
        package static let defaultPort = 8081
        /// The bearer tokens, one per line (`#` comments), read again when the file changes.
        package var tokenFile: String
        package var port: Int
        /// Apple requests per second the app API's refreshes may take of each app's budget per
        /// endpoint; `nil`: 10% of it.
        package var refreshRateLimit: Double?

        package init(tokenFile: String, port: Int = defaultPort, refreshRateLimit: Double? = nil) {
            self.tokenFile = tokenFile
            self.port = port
            self.refreshRateLimit = refreshRateLimit
        }
    }
    /// The App Store Connect API key (`appStoreConnect`), when configured: `doctor` reads (and can
    /// set) each app's notification URLs with it.
    package var appStoreConnect: AppStoreConnectKey?

    /// An App Store Connect API key: the `.p8` file's path, never its contents.
    package struct AppStoreConnectKey: Sendable, Hashable {
        package var id: String
        package var issuer: String
        package var privateKeyPath: String
        /// `nil`: Apple's host.
        package var baseURL: String?
    }

    package init(targets: [Target], rootCertificates: [String]? = nil, giveUpAfter: Int? = nil, source: String) {
        self.targets = targets
        self.rootCertificates = rootCertificates
        self.giveUpAfter = giveUpAfter
        self.source = source
    }

    /// Every bundle ID the deployment knows: those of every target (before `--app` narrows them)
    /// and `knownApps`.
    package var knownBundleIds: Set<String> { Set(targets.map(\.app.bundleId) + knownApps) }

    /// The targets `--app` and `--environment` select (all when neither is given); an error when
    /// the selection matches none.
    package func targets(app bundleId: String?, environment: AppStoreEnvironment?) throws -> [Target] {
        let selected = targets.filter { target in
            (bundleId == nil || target.app.bundleId == bundleId) && (environment == nil || target.app.environment == environment)
        }
        guard !selected.isEmpty else {
            let wanted = [bundleId, environment.map { $0.rawValue }].compactMap { $0 }.joined(separator: " in ")
            throw ReconcilerError(
                .noSuchApp, source: source,
                detail: "\(source) configures no app \(wanted); it configures \(targets.map(\.app.description).joined(separator: ", "))")
        }
        return selected
    }

    /// The target signed data names, if configured: the bundle id and environment, and in
    /// production the app's Apple ID.
    package func target(bundleId: String?, environment: AppStoreEnvironment?, appAppleId: Int64?) -> Target? {
        targets.first { $0.app.owns(bundleId: bundleId, environment: environment, appAppleId: appAppleId) }
    }

    // MARK: The file

    /// Reads and checks a configuration file. Errors name the file and the key, never a secret
    /// (the file holds the key's path, not the key).
    package static func load(file path: String) throws -> ReconcilerConfiguration {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw ReconcilerError(.unreadable, source: path, detail: "cannot read \(path): \((error as NSError).localizedDescription)")
        }
        let file: ConfigurationFile
        do {
            file = try YAMLDecoder().decode(ConfigurationFile.self, from: text)
        } catch let unknown as StrictKeys.Unknown {
            throw ReconcilerError(
                .unknownKey, source: path, key: Self.keyPath(unknown.path + [Key(unknown.key)]),
                detail: "\(path): unknown key \(Self.keyPath(unknown.path + [Key(unknown.key)]))")
        } catch let error as DecodingError {
            throw Self.describe(error, file: path)
        } catch {
            throw ReconcilerError(.invalidYAML, source: path, detail: "\(path) is not valid YAML: \(Self.position(of: error))")
        }
        return try resolve(file, path: path)
    }

    private static func resolve(_ file: ConfigurationFile, path: String) throws -> ReconcilerConfiguration {
        guard !file.apps.isEmpty else { throw ReconcilerError(.missingKey, source: path, key: "apps", detail: "\(path): apps lists no app") }
        let globalTerms = try terms(file.nonRenewingTerms, key: "nonRenewingTerms", path: path)
        if let giveUp = file.giveUpAfter, giveUp < 1 {
            throw ReconcilerError(.invalidValue, source: path, key: "giveUpAfter", detail: "\(path): giveUpAfter must be at least 1")
        }
        for (environment, limit) in [("production", file.rateLimit?.production), ("sandbox", file.rateLimit?.sandbox)] {
            if let limit, !(limit > 0) {
                throw ReconcilerError(
                    .invalidValue, source: path, key: "rateLimit.\(environment)", detail: "\(path): rateLimit.\(environment) must be above 0")
            }
        }
        for (environment, url) in [("production", file.apiBaseURL?.production), ("sandbox", file.apiBaseURL?.sandbox)] {
            if let url, URL(string: url)?.scheme == nil {
                throw ReconcilerError(
                    .invalidValue, source: path, key: "apiBaseURL.\(environment)",
                    detail: "\(path): apiBaseURL.\(environment) must be a URL such as https://api.storekit.apple.com")
            }
        }
        // The top level's alone first, so its own mistakes are named at its keys.
        _ = try consumption(file.consumption, key: "consumption", path: path, policyRequired: false)
        let everyAppsForwardTo = try file.forwardTo.map { try destinations($0, key: "forwardTo", path: path) }
        var targets: [Target] = []
        for (index, app) in file.apps.enumerated() {
            let at = "apps[\(index)]"
            guard !app.bundleId.isEmpty else {
                throw ReconcilerError(.invalidValue, source: path, key: "\(at).bundleId", detail: "\(path): \(at).bundleId is empty")
            }
            let keyAt = app.key == nil ? "key" : "\(at).key"
            guard let key = app.key ?? file.key else {
                throw ReconcilerError(
                    .missingKey, source: path, key: "key",
                    detail: "\(path): no In-App Purchase key for \(app.bundleId): set key (the team's) or \(at).key")
            }
            var environments: [AppStoreEnvironment] = []
            for (position, name) in (app.environments ?? ["production"]).enumerated() {
                switch name.lowercased() {
                case "production": environments.append(.production)
                case "sandbox": environments.append(.sandbox)
                default:
                    throw ReconcilerError(
                        .invalidValue, source: path, key: "\(at).environments[\(position)]",
                        detail: "\(path): \(at).environments[\(position)] is \(name): use production or sandbox")
                }
            }
            guard !environments.isEmpty else {
                throw ReconcilerError(.invalidValue, source: path, key: "\(at).environments", detail: "\(path): \(at).environments is empty")
            }
            let appTerms = try terms(app.nonRenewingTerms, key: "\(at).nonRenewingTerms", path: path)
            let appConsumption = try consumption(
                app.consumption.map { $0.over(file.consumption) } ?? file.consumption,
                key: app.consumption == nil ? "consumption" : "\(at).consumption",
                path: path, policyRequired: true)
            let forwardTargets = try app.forwardTo.map { try destinations($0, key: "\(at).forwardTo", path: path) } ?? everyAppsForwardTo
            for environment in environments {
                let forwardTo = (forwardTargets ?? []).filter { $0.receives(environment) }
                if environment == .production, app.appAppleId == nil {
                    throw ReconcilerError(
                        .missingKey, source: path, key: "\(at).appAppleId",
                        detail: "\(path): \(at).appAppleId is required for production (notifications carry it)")
                }
                let target = AppTarget(bundleId: app.bundleId, environment: environment, appAppleId: app.appAppleId)
                guard !targets.contains(where: { $0.app.bundleId == target.bundleId && $0.app.environment == environment }) else {
                    throw ReconcilerError(
                        .duplicateApp, source: path, key: "\(at).bundleId", detail: "\(path): \(target) is configured twice")
                }
                let entitlement = EntitlementPolicy(
                    billingRetryEntitles: file.entitleBillingRetry ?? false,
                    nonRenewingTerms: globalTerms.merging(appTerms) { $1 },
                    sandboxEntitles: app.sandboxEntitles ?? file.sandboxEntitles ?? true)
                let origins = SettingOrigins(
                    bundleId: .file(path: path, key: "\(at).bundleId"), appAppleId: .file(path: path, key: "\(at).appAppleId"),
                    environment: .file(path: path, key: "\(at).environments"), keyId: .file(path: path, key: "\(keyAt).id"),
                    issuerId: .file(path: path, key: "\(keyAt).issuer"), privateKeyPath: .file(path: path, key: "\(keyAt).privateKeyPath"),
                    rootCertificates: file.rootCertificates == nil
                        ? .named("the bundled Apple Root CA - G3") : .file(path: path, key: "rootCertificates"))
                targets.append(
                    Target(
                        app: target, key: .init(id: key.id, issuer: key.issuer, privateKeyPath: key.privateKeyPath), origins: origins,
                        apiBaseURL: file.apiBaseURL?[environment], rateLimit: file.rateLimit?[environment], entitlement: entitlement,
                        forwardTo: forwardTo, consumption: appConsumption))
            }
        }
        var configuration = ReconcilerConfiguration(
            targets: targets, rootCertificates: file.rootCertificates, giveUpAfter: file.giveUpAfter, source: path)
        for (index, bundleId) in (file.knownApps ?? []).enumerated() where bundleId.isEmpty {
            throw ReconcilerError(.invalidValue, source: path, key: "knownApps[\(index)]", detail: "\(path): knownApps[\(index)] is empty")
        }
        configuration.knownApps = file.knownApps ?? []
        configuration.appApi = try file.appApi.map { try appAPISettings($0, path: path) }
        configuration.appStoreConnect = file.appStoreConnect.map {
            AppStoreConnectKey(id: $0.id, issuer: $0.issuer, privateKeyPath: $0.privateKeyPath, baseURL: $0.baseURL)
        }
        for (key, url) in [("appStoreConnect.baseURL", file.appStoreConnect?.baseURL), ("notificationURL", file.notificationURL)]
            + file.apps.enumerated().map({ ("apps[\($0.offset)].notificationURL", $0.element.notificationURL) })
        {
            if let url, URL(string: url)?.scheme == nil {
                throw ReconcilerError(
                    .invalidValue, source: path, key: key,
                    detail: "\(path): \(key) must be a URL such as https://reconciler.example.com/notifications")
            }
        }
        for index in configuration.targets.indices {
            let bundleId = configuration.targets[index].app.bundleId
            configuration.targets[index].notificationURL = file.apps.first { $0.bundleId == bundleId }?.notificationURL ?? file.notificationURL
        }
        return configuration
    }

    /// `consumption:` as it applies to an app (its own over the top level's), checked: a policy
    /// that breaks Apple's rules is refused when the file loads. Unless `policyRequired`, the
    /// fields an app's section may still give are not required yet.
    private static func consumption(
        _ consumption: ConfigurationFile.Consumption?, key: String, path: String, policyRequired: Bool
    ) throws -> ConsumptionSettings {
        var settings = ConsumptionSettings()
        guard let consumption else { return settings }
        if let text = consumption.liveRequests {
            guard let live = ConsumptionSettings.LiveRequests(rawValue: text.lowercased()) else {
                throw ReconcilerError(
                    .invalidValue, source: path, key: "\(key).liveRequests",
                    detail: "\(path): \(key).liveRequests is \(text): use watch or ignore")
            }
            settings.liveRequests = live
        }
        guard consumption.saysPolicy else { return settings }
        var answerAfter = ConsumptionPolicy.defaultAnswerAfter
        if let text = consumption.answerAfter {
            guard let duration = Duration(parsing: text) else {
                throw ReconcilerError(
                    .invalidValue, source: path, key: "\(key).answerAfter",
                    detail: "\(path): \(key).answerAfter is \(text): give a duration with its unit, such as 2h or 90m")
            }
            answerAfter = duration
        }
        func fields(_ answer: ConfigurationFile.Consumption.Answer) -> ConsumptionPolicy.Fields {
            ConsumptionPolicy.Fields(
                deliveryStatus: answer.deliveryStatus.map { DeliveryStatus(rawValue: $0.uppercased()) },
                sampleContentProvided: answer.sampleContentProvided,
                refundPreference: answer.refundPreference.map { RefundPreference(rawValue: $0.uppercased()) },
                consumptionPercentage: answer.consumptionPercentage)
        }
        let policy = ConsumptionPolicy(
            customerConsented: consumption.customerConsented ?? false, defaults: fields(consumption.answer),
            products: (consumption.products ?? [:]).mapValues(fields), answerAfter: answerAfter, automatic: consumption.automatic ?? false)
        let required: Set<String> = ["deliveryStatus", "sampleContentProvided"]
        if let problem = policy.problems().first(where: { policyRequired || !required.contains($0.key) }) {
            throw ReconcilerError(
                .invalidValue, source: path, key: "\(key).\(problem.key)",
                detail: "\(path): \(key).\(problem.key) \(problem.why); Apple's rules for Send Consumption Information")
        }
        settings.policy = policy
        return settings
    }

    /// `appApi` as written, checked: a token file, a port (default 8081) and a positive rate.
    private static func appAPISettings(_ written: ConfigurationFile.AppApi, path: String) throws -> AppAPISettings {
        guard let tokenFile = written.tokenFile, !tokenFile.isEmpty else {
            throw ReconcilerError(
                .missingKey, source: path, key: "appApi.tokenFile",
                detail: "\(path): appApi needs tokenFile, the file of the app's bearer tokens (one per line)")
        }
        let port = written.port ?? AppAPISettings.defaultPort
        guard (1...65535).contains(port) else {
            throw ReconcilerError(.invalidValue, source: path, key: "appApi.port", detail: "\(path): appApi.port must be a port, 1 to 65535")
        }
        if let rate = written.refreshRateLimit, !(rate > 0) {
            throw ReconcilerError(
                .invalidValue, source: path, key: "appApi.refreshRateLimit",
                detail: "\(path): appApi.refreshRateLimit must be a positive number of requests per second")
        }
        return AppAPISettings(tokenFile: tokenFile, port: port, refreshRateLimit: written.refreshRateLimit)
    }

    /// A `forwardTo` as written, checked: a URL, a mapping, or a list of mappings each with its
    /// unique `name`; each target's `environments` are production or sandbox, its `types` each
    /// `TYPE` or `TYPE/SUBTYPE`. Several targets may receive one app and environment.
    private static func destinations(_ written: ConfigurationFile.ForwardTo, key: String, path: String) throws -> [ForwardingDestination] {
        let mappings: [(ConfigurationFile.ForwardTo, key: String)]
        switch written {
        case .url, .mapping: mappings = [(written, key)]
        case .list(let list):
            guard !list.isEmpty else { throw ReconcilerError(.invalidValue, source: path, key: key, detail: "\(path): \(key) is empty") }
            mappings = list.enumerated().map { (.mapping($1), "\(key)[\($0)]") }
        }
        var names: Set<String> = []
        let topKey = key
        return try mappings.map { written, key in
            var target = try destination(written, key: key, path: path)
            guard case .mapping(let mapping) = written else { return target }
            if mappings.count == 1, key == topKey, mapping.name == nil { return try filtered(target, mapping, key: key, path: path) }
            guard let name = mapping.name, !name.isEmpty else {
                throw ReconcilerError(
                    mapping.name == nil ? .missingKey : .invalidValue, source: path, key: "\(key).name",
                    detail: "\(path): \(key).name: each target of a list needs its name (forward --redeliver --target NAME)")
            }
            guard names.insert(name).inserted else {
                throw ReconcilerError(.invalidValue, source: path, key: "\(key).name", detail: "\(path): \(key).name \(name) is given twice")
            }
            target.name = name
            return try filtered(target, mapping, key: key, path: path)
        }
    }

    /// `target` with the `environments` and `types` of `mapping`.
    private static func filtered(
        _ target: ForwardingDestination, _ mapping: ConfigurationFile.ForwardTo.Mapping, key: String, path: String
    ) throws -> ForwardingDestination {
        var target = target
        if let types = mapping.types {
            guard !types.isEmpty else {
                throw ReconcilerError(.invalidValue, source: path, key: "\(key).types", detail: "\(path): \(key).types is empty")
            }
            if let bad = NotificationTypeFilter.malformed(types) {
                throw ReconcilerError(
                    .invalidValue, source: path, key: "\(key).types",
                    detail: "\(path): \(key).types: \(bad) is not TYPE or TYPE/SUBTYPE as the run report prints them (REFUND, "
                        + "DID_CHANGE_RENEWAL_STATUS/AUTO_RENEW_DISABLED)")
            }
            target.types = NotificationTypeFilter(types)
        }
        if let written = mapping.environments {
            guard !written.isEmpty else {
                throw ReconcilerError(.invalidValue, source: path, key: "\(key).environments", detail: "\(path): \(key).environments is empty")
            }
            target.environments = Set(
                try written.enumerated().map { position, name in
                    switch name.lowercased() {
                    case "production": return .production
                    case "sandbox": return .sandbox
                    default:
                        throw ReconcilerError(
                            .invalidValue, source: path, key: "\(key).environments[\(position)]",
                            detail: "\(path): \(key).environments[\(position)] is \(name): use production or sandbox")
                    }
                })
        }
        return target
    }

    /// A `forwardTo` as written, checked: one URL source; a secret source or `unsigned: true` in
    /// the mapping form (the plain URL is signed by the process's secret); no secret in the file.
    private static func destination(_ written: ConfigurationFile.ForwardTo, key: String, path: String) throws -> ForwardingDestination {
        switch written {
        case .url(let url):
            guard !url.isEmpty else { throw ReconcilerError(.invalidValue, source: path, key: key, detail: "\(path): \(key) is empty") }
            return ForwardingDestination(url: .inline(url), signing: .process, key: key)
        case .list:
            throw ReconcilerError(.invalidValue, source: path, key: key, detail: "\(path): \(key) is a list inside a list")
        case .mapping(let mapping):
            if mapping.writesSecret {
                throw ReconcilerError(
                    .invalidValue, source: path, key: "\(key).secret",
                    detail: "\(path): \(key).secret: the file holds no secret; name where it is read with secretFile (a file holding it) "
                        + "or secretEnv (an environment variable holding it)")
            }
            let urls = try sources(
                [
                    ("url", mapping.url.map(ForwardingDestination.Source.inline)), ("urlFile", mapping.urlFile.map { .file($0) }),
                    ("urlEnv", mapping.urlEnv.map { .environment($0) }),
                ], key: key, path: path)
            guard urls.count == 1, let url = urls.first else {
                throw ReconcilerError(
                    urls.isEmpty ? .missingKey : .invalidValue, source: path, key: "\(key).url",
                    detail: "\(path): \(key) needs exactly one of url, urlFile or urlEnv (\(urls.count) given)")
            }
            let secrets = try sources(
                [("secretFile", mapping.secretFile.map { .file($0) }), ("secretEnv", mapping.secretEnv.map { .environment($0) })],
                key: key, path: path)
            guard secrets.count <= 1 else {
                throw ReconcilerError(
                    .invalidValue, source: path, key: "\(key).secretFile", detail: "\(path): \(key) takes secretFile or secretEnv, not both")
            }
            switch (secrets.first, mapping.unsigned ?? false) {
            case (let secret?, false):
                return ForwardingDestination(url: url, signing: .secret(secret), key: key)
            case (nil, true):
                return ForwardingDestination(url: url, signing: .unsigned, key: key)
            case (_?, true):
                throw ReconcilerError(
                    .invalidValue, source: path, key: "\(key).unsigned",
                    detail: "\(path): \(key) names a secret and unsigned: true; keep one")
            case (nil, false):
                throw ReconcilerError(
                    .missingKey, source: path, key: "\(key).secretFile",
                    detail: "\(path): \(key) names no secret for the Reconciler-Signature of its deliveries: add secretFile (a file "
                        + "holding it) or secretEnv (an environment variable holding it), or unsigned: true to forward unsigned")
            }
        }
    }

    /// The sources given among `candidates` (name, source), each checked not to be empty.
    private static func sources(
        _ candidates: [(name: String, source: ForwardingDestination.Source?)], key: String, path: String
    ) throws -> [ForwardingDestination.Source] {
        try candidates.compactMap { name, source in
            switch source {
            case .inline(let text), .file(let text), .environment(let text):
                guard !text.isEmpty else {
                    throw ReconcilerError(.invalidValue, source: path, key: "\(key).\(name)", detail: "\(path): \(key).\(name) is empty")
                }
                return source
            case nil: return nil
            }
        }
    }

    private static func terms(_ terms: [String: String]?, key: String, path: String) throws -> [String: Int64] {
        var result: [String: Int64] = [:]
        for (product, text) in terms ?? [:] {
            guard let duration = Duration(parsing: text), duration > .zero else {
                throw ReconcilerError(
                    .invalidValue, source: path, key: "\(key).\(product)",
                    detail: "\(path): \(key).\(product) is \(text): give a duration such as 30d")
            }
            result[product] = duration.milliseconds
        }
        return result
    }

    // MARK: Errors

    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ value: String) { stringValue = value }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// `apps[1].key.id`.
    static func keyPath(_ path: [any CodingKey]) -> String {
        path.reduce("") { text, key in
            if let index = key.intValue { return "\(text)[\(index)]" }
            return text.isEmpty ? key.stringValue : "\(text).\(key.stringValue)"
        }
    }

    private static func describe(_ error: DecodingError, file path: String) -> ReconcilerError {
        switch error {
        case .keyNotFound(let key, let context):
            let name = keyPath(context.codingPath + [key])
            return ReconcilerError(.missingKey, source: path, key: name, detail: "\(path): \(name) is missing")
        case .typeMismatch(let type, let context), .valueNotFound(let type, let context):
            let name = keyPath(context.codingPath)
            return ReconcilerError(
                .invalidValue, source: path, key: name, detail: "\(path): \(name) must be \(Self.describe(type))")
        case .dataCorrupted(let context):
            if let unknown = context.underlyingError as? StrictKeys.Unknown {
                let name = keyPath(unknown.path + [Key(unknown.key)])
                return ReconcilerError(.unknownKey, source: path, key: name, detail: "\(path): unknown key \(name)")
            }
            if let yaml = context.underlyingError as? YamlError {
                return ReconcilerError(.invalidYAML, source: path, detail: "\(path) is not valid YAML: \(position(of: yaml))")
            }
            let name = keyPath(context.codingPath)
            return ReconcilerError(
                .invalidValue, source: path, key: name,
                detail: "\(path): \(name.isEmpty ? "the file" : name) cannot be read: \(context.debugDescription)")
        @unknown default:
            return ReconcilerError(.invalidYAML, source: path, detail: "\(path) cannot be read")
        }
    }

    /// What a YAML error says, and where: the parser's own words (fixed texts) and the line and
    /// column, never the line itself, which may hold a `forwardTo` URL with its credentials.
    static func position(of error: any Error) -> String {
        guard let yaml = error as? YamlError else {
            if case .dataCorrupted(let context) = error as? DecodingError, let underlying = context.underlyingError {
                return position(of: underlying)
            }
            return "it cannot be parsed"
        }
        func at(_ mark: Mark) -> String { "line \(mark.line), column \(mark.column)" }
        func within(_ context: YamlError.Context?) -> String { context.map { " (\($0.text) at \(at($0.mark)))" } ?? "" }
        switch yaml {
        case .scanner(let context, let problem, let mark, _), .parser(let context, let problem, let mark, _),
            .composer(let context, let problem, let mark, _):
            return "\(problem) at \(at(mark))\(within(context))"
        case .reader(let problem, let offset, _, let yaml):
            guard let offset, offset <= yaml.count else { return problem }
            let before = yaml.prefix(offset)
            let line = before.reduce(1) { $1 == "\n" ? $0 + 1 : $0 }
            let column = before.count - (before.lastIndex(of: "\n").map { before.distance(from: before.startIndex, to: $0) + 1 } ?? 0) + 1
            return "\(problem) at line \(line), column \(column)"
        case .duplicatedKeysInMapping(_, let context):
            return "a key appears twice in one mapping at \(at(context.mark))"
        case .dataCouldNotBeDecoded: return "it is not UTF-8 text"
        default: return "it cannot be parsed"
        }
    }

    private static func describe(_ type: Any.Type) -> String {
        switch type {
        case is ConfigurationFile.ForwardTo.Type: "a URL or a mapping {url | urlFile | urlEnv, secretFile | secretEnv | unsigned: true}"
        case is String.Type: "a string"
        case is Int.Type, is Int64.Type: "a whole number"
        case is Double.Type: "a number"
        case is Bool.Type: "true or false"
        case is [Any].Type: "a list"
        default: "a mapping"
        }
    }
}

extension ReconcilerError {
    /// A configuration that cannot be used: `detail` names the file (`source`, or "the environment")
    /// and the key at fault, never a secret (the file holds no key, only its path).
    init(_ code: Code, source: String, key: String? = nil, detail: String) {
        self.init(code, detail)
        self.key = key
    }
}
