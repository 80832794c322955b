import AppStoreServer
import ArgumentParser
import Crypto
import Foundation
import Reconciler
import ReconcilerConfiguration
import ReconcilerDomain

/// How to call the App Store Server API.
struct APIOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The In-App Purchase key id (env APP_STORE_KEY_ID).", valueName: "id"))
    var keyId: String?

    @Option(name: .long, help: ArgumentHelp("The issuer id from App Store Connect (env APP_STORE_ISSUER_ID).", valueName: "id"))
    var issuerId: String?

    @Option(name: .long, help: ArgumentHelp("The .p8 private key file (env APP_STORE_PRIVATE_KEY_PATH).", valueName: "path"))
    var privateKeyPath: String?

    @Option(
        name: .long, help: ArgumentHelp("Override the App Store Server API base URL, e.g. a mock (env APP_STORE_API_BASE_URL).", valueName: "url"))
    var apiBaseURL: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "This process's own cap, requests per second per endpoint (default: none). The app's budget is APP_STORE_RATE_LIMIT, shared by every process of the app that calls the same endpoint; what a capped process leaves goes to the others.",
            valueName: "n"))
    var rateLimit: Double?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The longest wait for a rate-limited endpoint to reopen (a 429's Retry-After), default 120; a longer one fails that shard or customer for the next run instead of sleeping (env APP_STORE_MAX_RETRY_AFTER).",
            valueName: "seconds"))
    var maxRetryAfter: Double?

    @Option(name: .long, help: ArgumentHelp("Per-request timeout in seconds.", valueName: "seconds"))
    var requestTimeout: Double = 30

    /// The key the flags and the `APP_STORE_*` variables name (one app without a configuration
    /// file); `nil` when none is set. With a file, each app's key is the file's.
    func environmentKey() throws -> ReconcilerConfiguration.APIKey? {
        let keyId = keyId ?? Env.value("APP_STORE_KEY_ID")
        let issuerId = issuerId ?? Env.value("APP_STORE_ISSUER_ID")
        let keyPath = privateKeyPath ?? Env.value("APP_STORE_PRIVATE_KEY_PATH")
        guard keyId != nil || issuerId != nil || keyPath != nil else { return nil }
        guard let keyId else { throw ReconcilerError.configuration("no key id: set APP_STORE_KEY_ID or --key-id") }
        guard let issuerId else { throw ReconcilerError.configuration("no issuer id: set APP_STORE_ISSUER_ID or --issuer-id") }
        guard let keyPath else {
            throw ReconcilerError.configuration("no private key: set APP_STORE_PRIVATE_KEY_PATH or --private-key-path (the .p8 file)")
        }
        return .init(id: keyId, issuer: issuerId, privateKeyPath: keyPath)
    }

    /// Names the flags given in place of the `APP_STORE_*` variables (one app, no configuration
    /// file), so that a hint names what set the key.
    func namingFlags(in origins: inout SettingOrigins) {
        if keyId != nil { origins.keyId = .named("--key-id") }
        if issuerId != nil { origins.issuerId = .named("--issuer-id") }
        if privateKeyPath != nil { origins.privateKeyPath = .named("--private-key-path") }
    }

    /// `--api-base-url` or `APP_STORE_API_BASE_URL`: a base URL that wins over the configuration's (the mock).
    func baseURLOverride() throws -> String? {
        let baseURL = apiBaseURL ?? Env.value("APP_STORE_API_BASE_URL")
        if let baseURL, URL(string: baseURL)?.scheme == nil {
            throw ReconcilerError.configuration("APP_STORE_API_BASE_URL must be a URL such as http://127.0.0.1:8081, got \(baseURL)")
        }
        return baseURL
    }

    /// The private keys read so far, by path: a team key serves several apps from one file.
    struct PrivateKeys {
        private var byPath: [String: P256.Signing.PrivateKey] = [:]

        /// The key at `path`; one that cannot be read names the setting that names it (`origin`).
        mutating func key(at path: String, namedBy origin: SettingOrigin) throws -> P256.Signing.PrivateKey {
            if let key = byPath[path] { return key }
            let key = try Result { try APIAuthenticationTokens.loadPrivateKey(path: path) }.mapError {
                ReconcilerError.configuration("\(origin): \($0)")
            }.get()
            byPath[path] = key
            return key
        }
    }

    /// The App Store Server API client of one app in one environment: its JWT names the app
    /// (`bid`), and it spends that app's budget (``requestBudget(for:)``).
    func client(
        for target: ReconcilerConfiguration.Target, budget: RequestBudget, keys: inout PrivateKeys
    ) throws -> AppStoreServerAPIClient {
        let origins = target.origins
        guard let apiKey = target.key else {
            throw ReconcilerError.configuration(
                "no In-App Purchase key for \(target.app): set \(SettingOrigin.list([origins.keyId, origins.issuerId, origins.privateKeyPath]))")
        }
        let key = try keys.key(at: apiKey.privateKeyPath, namedBy: origins.privateKeyPath)
        var retryPolicy = AppStoreServerAPIClient.RetryPolicy()
        if let seconds = try maximumRetryAfterSeconds() {
            retryPolicy.maximumRetryAfter = .milliseconds(Int64(seconds * 1000))
        }
        return AppStoreServerAPIClient(
            configuration: .init(
                baseURL: try baseURLOverride() ?? target.apiBaseURL,
                tokens: .init(privateKey: key, keyId: apiKey.id, issuerId: apiKey.issuer, bundleId: target.app.bundleId),
                environment: target.app.environment, requestTimeout: .milliseconds(Int64(requestTimeout * 1000)), retryPolicy: retryPolicy,
                requestsPerSecond: budget.alone))
    }

    /// The request budget of this process for one app and environment: the app's budget, the same
    /// in every process of the app (the configuration file's `rateLimit`, or APP_STORE_RATE_LIMIT:
    /// the one place that sets it), and `--rate-limit`, this process's own cap. ``SharedBudget``
    /// divides the app's budget among the processes that use each endpoint.
    func requestBudget(for target: ReconcilerConfiguration.Target) throws -> RequestBudget {
        let app =
            try target.rateLimit
            ?? Env.value("APP_STORE_RATE_LIMIT").map { value in
                guard let number = Double(value), number > 0, number.isFinite else {
                    throw ReconcilerError.configuration("APP_STORE_RATE_LIMIT must be a positive number")
                }
                return number
            }
        if let rateLimit {
            guard rateLimit > 0, rateLimit.isFinite else { throw ReconcilerError.configuration("--rate-limit must be positive") }
        }
        return RequestBudget(environment: target.app.environment, appRequestsPerSecond: app, cap: rateLimit)
    }

    /// `--max-retry-after` or `APP_STORE_MAX_RETRY_AFTER`: more than 0 and at most a day.
    private func maximumRetryAfterSeconds() throws -> Double? {
        let name: String, text: String
        if let maxRetryAfter {
            (name, text) = ("--max-retry-after", String(maxRetryAfter))
        } else if let value = Env.value("APP_STORE_MAX_RETRY_AFTER") {
            (name, text) = ("APP_STORE_MAX_RETRY_AFTER", value)
        } else {
            return nil
        }
        guard let seconds = Double(text), seconds > 0, seconds <= 86_400 else {
            throw ReconcilerError.configuration("\(name) must be a number of seconds above 0 and at most 86400, got \(text)")
        }
        return seconds
    }
}
