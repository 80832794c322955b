import AppStoreServer
import Foundation
import ReconcilerShared

/// The configuration file (`--config FILE` or `RECONCILER_CONFIG`), as written: one In-App
/// Purchase key for the team, the apps, and what applies to all of them. Keys are checked: an
/// unknown key is an error (a typo must not silently mean "default").
///
/// ```yaml
/// key:
///   id: 2X9R4HXF34
///   issuer: 57246542-96fe-1a63-e053-0824d011072a
///   privateKeyPath: /run/secrets/AuthKey_2X9R4HXF34.p8
/// rateLimit: {production: 40, sandbox: 4}
/// apps:
///   - bundleId: com.example.one
///     appAppleId: 1234567890
///     environments: [production, sandbox]
///     forwardTo: {urlEnv: ONE_HOOK_URL, secretFile: /run/secrets/one-hook-secret}
/// ```
struct ConfigurationFile: Decodable {
    struct Key: Decodable {
        var id: String
        var issuer: String
        var privateKeyPath: String

        private enum CodingKeys: String, CodingKey, CaseIterable { case id, issuer, privateKeyPath }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            try StrictKeys.check(decoder, CodingKeys.self)
            id = try container.decode(String.self, forKey: .id)
            issuer = try container.decode(String.self, forKey: .issuer)
            privateKeyPath = try container.decode(String.self, forKey: .privateKeyPath)
        }
    }

    /// A value per environment (`production`, `sandbox`), each optional.
    struct PerEnvironment<Value: Decodable>: Decodable {
        var production: Value?
        var sandbox: Value?

        private enum CodingKeys: String, CodingKey, CaseIterable { case production, sandbox }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            try StrictKeys.check(decoder, CodingKeys.self)
            production = try container.decodeIfPresent(Value.self, forKey: .production)
            sandbox = try container.decodeIfPresent(Value.self, forKey: .sandbox)
        }

        subscript(environment: AppStoreEnvironment) -> Value? { environment == .sandbox ? sandbox : production }
    }

    /// `consumption:`, at the top level or in one app's entry: what the deployment wants of its
    /// consumption requests.
    struct Consumption: Decodable {
        var liveRequests: String?
        var customerConsented: Bool?
        var answer: Answer
        var products: [String: Answer]?
        var answerAfter: String?
        var automatic: Bool?

        /// The fields of an answer, at the section's level or one product's.
        struct Answer: Decodable {
            var deliveryStatus: String?
            var sampleContentProvided: Bool?
            var refundPreference: String?
            var consumptionPercentage: Int?

            private enum CodingKeys: String, CodingKey, CaseIterable {
                case deliveryStatus, sampleContentProvided, refundPreference, consumptionPercentage
            }

            init(from decoder: any Decoder) throws {
                let container = try decoder.container(keyedBy: CodingKeys.self)
                try StrictKeys.check(decoder, CodingKeys.self)
                deliveryStatus = try container.decodeIfPresent(String.self, forKey: .deliveryStatus)
                sampleContentProvided = try container.decodeIfPresent(Bool.self, forKey: .sampleContentProvided)
                refundPreference = try container.decodeIfPresent(String.self, forKey: .refundPreference)
                consumptionPercentage = try container.decodeIfPresent(Int.self, forKey: .consumptionPercentage)
            }

            init() {}

            var isEmpty: Bool { deliveryStatus == nil && sampleContentProvided == nil && refundPreference == nil && consumptionPercentage == nil }
        }

        private enum CodingKeys: String, CodingKey, CaseIterable {
            case liveRequests, customerConsented, deliveryStatus, sampleContentProvided, refundPreference, consumptionPercentage, products
            case answerAfter, automatic
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            try StrictKeys.check(decoder, CodingKeys.self)
            liveRequests = try container.decodeIfPresent(String.self, forKey: .liveRequests)
            customerConsented = try container.decodeIfPresent(Bool.self, forKey: .customerConsented)
            answer = Answer()
            answer.deliveryStatus = try container.decodeIfPresent(String.self, forKey: .deliveryStatus)
            answer.sampleContentProvided = try container.decodeIfPresent(Bool.self, forKey: .sampleContentProvided)
            answer.refundPreference = try container.decodeIfPresent(String.self, forKey: .refundPreference)
            answer.consumptionPercentage = try container.decodeIfPresent(Int.self, forKey: .consumptionPercentage)
            products = try container.decodeIfPresent([String: Answer].self, forKey: .products)
            answerAfter = try container.decodeIfPresent(String.self, forKey: .answerAfter)
            automatic = try container.decodeIfPresent(Bool.self, forKey: .automatic)
        }

        init() { answer = Answer() }

        /// Whether it says anything of a policy (beyond `liveRequests`).
        var saysPolicy: Bool { customerConsented != nil || !answer.isEmpty || products != nil || answerAfter != nil || automatic != nil }

        /// An app's section over the top level's, key by key (products by product ID).
        func over(_ base: Consumption?) -> Consumption {
            guard let base else { return self }
            var merged = self
            merged.liveRequests = liveRequests ?? base.liveRequests
            merged.customerConsented = customerConsented ?? base.customerConsented
            merged.answer.deliveryStatus = answer.deliveryStatus ?? base.answer.deliveryStatus
            merged.answer.sampleContentProvided = answer.sampleContentProvided ?? base.answer.sampleContentProvided
            merged.answer.refundPreference = answer.refundPreference ?? base.answer.refundPreference
            merged.answer.consumptionPercentage = answer.consumptionPercentage ?? base.answer.consumptionPercentage
            if base.products != nil || products != nil { merged.products = (base.products ?? [:]).merging(products ?? [:]) { $1 } }
            merged.answerAfter = answerAfter ?? base.answerAfter
            merged.automatic = automatic ?? base.automatic
            return merged
        }
    }

    /// `appStoreConnect:`, top level only: an App Store Connect API key of its own (named like the
    /// In-App Purchase key's fields) and, for a mock, its base URL.
    struct AppStoreConnect: Decodable {
        var id: String
        var issuer: String
        var privateKeyPath: String
        var baseURL: String?

        private enum CodingKeys: String, CodingKey, CaseIterable { case id, issuer, privateKeyPath, baseURL }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            try StrictKeys.check(decoder, CodingKeys.self)
            id = try container.decode(String.self, forKey: .id)
            issuer = try container.decode(String.self, forKey: .issuer)
            privateKeyPath = try container.decode(String.self, forKey: .privateKeyPath)
            baseURL = try container.decodeIfPresent(String.self, forKey: .baseURL)
        }
    }

    /// `appApi:`, top level only: the app API `serve` answers on a port of its own.
    struct AppApi: Decodable {
        var tokenFile: String?
        var port: Int?
        var refreshRateLimit: Double?

        private enum CodingKeys: String, CodingKey, CaseIterable { case tokenFile, port, refreshRateLimit }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            try StrictKeys.check(decoder, CodingKeys.self)
            tokenFile = try container.decodeIfPresent(String.self, forKey: .tokenFile)
            port = try container.decodeIfPresent(Int.self, forKey: .port)
            refreshRateLimit = try container.decodeIfPresent(Double.self, forKey: .refreshRateLimit)
        }
    }

    struct App: Decodable {
        var bundleId: String
        var appAppleId: Int64?
        var environments: [String]?
        var key: Key?
        var nonRenewingTerms: [String: String]?
        var sandboxEntitles: Bool?
        var forwardTo: ForwardTo?
        var consumption: Consumption?
        var notificationURL: String?

        private enum CodingKeys: String, CodingKey, CaseIterable {
            case bundleId, appAppleId, environments, key, nonRenewingTerms, sandboxEntitles, forwardTo, consumption
            case notificationURL
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            try StrictKeys.check(decoder, CodingKeys.self)
            bundleId = try container.decode(String.self, forKey: .bundleId)
            appAppleId = try container.decodeIfPresent(Int64.self, forKey: .appAppleId)
            environments = try container.decodeIfPresent([String].self, forKey: .environments)
            key = try container.decodeIfPresent(Key.self, forKey: .key)
            nonRenewingTerms = try container.decodeIfPresent([String: String].self, forKey: .nonRenewingTerms)
            sandboxEntitles = try container.decodeIfPresent(Bool.self, forKey: .sandboxEntitles)
            forwardTo = try container.decodeIfPresent(ForwardTo.self, forKey: .forwardTo)
            consumption = try container.decodeIfPresent(Consumption.self, forKey: .consumption)
            notificationURL = try container.decodeIfPresent(String.self, forKey: .notificationURL)
        }
    }

    /// `forwardTo` as written: a URL, or a mapping that says where the URL and the secret are read
    /// (``ForwardingDestination``). The node's kind decides, so a list of mappings can take its
    /// place beside them.
    enum ForwardTo: Decodable {
        case url(String)
        case mapping(Mapping)
        /// Several webhooks, each a mapping with its `name`.
        case list([Mapping])

        struct Mapping: Decodable {
            /// The target's name (`forward --redeliver --target`); required in a list.
            var name: String?
            /// The environments whose notifications it receives (`nil`: every one).
            var environments: [String]?
            /// The notification types it receives, `TYPE` or `TYPE/SUBTYPE` (`nil`: every one).
            var types: [String]?
            var url: String?
            var urlFile: String?
            var urlEnv: String?
            var secretFile: String?
            var secretEnv: String?
            var unsigned: Bool?
            /// Whether it has a `secret` key, known only to be refused by name: the file holds no secret.
            var writesSecret: Bool

            private enum CodingKeys: String, CodingKey, CaseIterable {
                case url, urlFile, urlEnv, secretFile, secretEnv, unsigned, secret, name, environments, types
            }

            init(from decoder: any Decoder) throws {
                let container = try decoder.container(keyedBy: CodingKeys.self)
                try StrictKeys.check(decoder, CodingKeys.self)
                name = try container.decodeIfPresent(String.self, forKey: .name)
                environments = try container.decodeIfPresent([String].self, forKey: .environments)
                types = try container.decodeIfPresent([String].self, forKey: .types)
                url = try container.decodeIfPresent(String.self, forKey: .url)
                urlFile = try container.decodeIfPresent(String.self, forKey: .urlFile)
                urlEnv = try container.decodeIfPresent(String.self, forKey: .urlEnv)
                secretFile = try container.decodeIfPresent(String.self, forKey: .secretFile)
                secretEnv = try container.decodeIfPresent(String.self, forKey: .secretEnv)
                unsigned = try container.decodeIfPresent(Bool.self, forKey: .unsigned)
                // Its value is not read, so no message can show it.
                writesSecret = container.contains(.secret)
            }
        }

        init(from decoder: any Decoder) throws {
            if let url = try? decoder.singleValueContainer().decode(String.self) {
                self = .url(url)
                return
            }
            if (try? decoder.unkeyedContainer()) != nil {
                var mappings: [Mapping] = []
                for element in try decoder.singleValueContainer().decode([ForwardTo].self) {
                    guard case .mapping(let mapping) = element else {
                        throw DecodingError.typeMismatch(
                            ForwardTo.self, .init(codingPath: decoder.codingPath, debugDescription: "a list of mappings, each with its name"))
                    }
                    mappings.append(mapping)
                }
                self = .list(mappings)
                return
            }
            guard (try? decoder.container(keyedBy: StrictKeys.AnyKey.self)) != nil else {
                throw DecodingError.typeMismatch(
                    ForwardTo.self, .init(codingPath: decoder.codingPath, debugDescription: "a URL or a mapping"))
            }
            self = .mapping(try Mapping(from: decoder))
        }
    }

    var key: Key?
    var apiBaseURL: PerEnvironment<String>?
    var rootCertificates: [String]?
    var rateLimit: PerEnvironment<Double>?
    var apps: [App]
    var nonRenewingTerms: [String: String]?
    var sandboxEntitles: Bool?
    var entitleBillingRetry: Bool?
    var forwardTo: ForwardTo?
    var giveUpAfter: Int?
    /// Bundle IDs of the team's apps this deployment does not serve.
    var knownApps: [String]?

    var consumption: Consumption?
    var appApi: AppApi?
    var appStoreConnect: AppStoreConnect?
    var notificationURL: String?

    private enum CodingKeys: String, CodingKey, CaseIterable {
        case key, apiBaseURL, rootCertificates, rateLimit, apps, nonRenewingTerms, sandboxEntitles, entitleBillingRetry, forwardTo, giveUpAfter
        case knownApps, consumption
        case appApi, appStoreConnect, notificationURL
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        try StrictKeys.check(decoder, CodingKeys.self)
        key = try container.decodeIfPresent(Key.self, forKey: .key)
        apiBaseURL = try container.decodeIfPresent(PerEnvironment<String>.self, forKey: .apiBaseURL)
        rootCertificates = try container.decodeIfPresent([String].self, forKey: .rootCertificates)
        rateLimit = try container.decodeIfPresent(PerEnvironment<Double>.self, forKey: .rateLimit)
        apps = try container.decode([App].self, forKey: .apps)
        nonRenewingTerms = try container.decodeIfPresent([String: String].self, forKey: .nonRenewingTerms)
        sandboxEntitles = try container.decodeIfPresent(Bool.self, forKey: .sandboxEntitles)
        entitleBillingRetry = try container.decodeIfPresent(Bool.self, forKey: .entitleBillingRetry)
        forwardTo = try container.decodeIfPresent(ForwardTo.self, forKey: .forwardTo)
        giveUpAfter = try container.decodeIfPresent(Int.self, forKey: .giveUpAfter)
        knownApps = try container.decodeIfPresent([String].self, forKey: .knownApps)
        consumption = try container.decodeIfPresent(Consumption.self, forKey: .consumption)
        appApi = try container.decodeIfPresent(AppApi.self, forKey: .appApi)
        appStoreConnect = try container.decodeIfPresent(AppStoreConnect.self, forKey: .appStoreConnect)
        notificationURL = try container.decodeIfPresent(String.self, forKey: .notificationURL)
    }
}

/// Refuses keys a mapping does not know, naming the first.
enum StrictKeys {
    struct Unknown: Error {
        var key: String
        var path: [any CodingKey]
    }

    struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    static func check<Keys: CodingKey & CaseIterable>(_ decoder: any Decoder, _: Keys.Type) throws {
        let known = Set(Keys.allCases.map(\.stringValue))
        let container = try decoder.container(keyedBy: AnyKey.self)
        if let unknown = container.allKeys.map(\.stringValue).sorted().first(where: { !known.contains($0) }) {
            throw Unknown(key: unknown, path: decoder.codingPath)
        }
    }
}
