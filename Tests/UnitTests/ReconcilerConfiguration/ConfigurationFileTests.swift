import AppStoreServer
import Foundation
import ReconcilerConfiguration
import ReconcilerDomain
import ReconcilerShared
import TestSupport
import Testing

/// The configuration file, without a database: the issue's example loads and means what it says;
/// every mistake names the file and the key.
@Suite struct ConfigurationFileTests {
    /// The example of the multi-app issue, key for key.
    static let example = """
        key:                              # the team's In-App Purchase key (may serve several apps)
          id: 2X9R4HXF34
          issuer: 57246542-96fe-1a63-e053-0824d011072a
          privateKeyPath: /run/secrets/AuthKey_2X9R4HXF34.p8
        apiBaseURL:                       # optional; Apple's hosts by default
          production: https://api.storekit.apple.com
          sandbox: https://api.storekit-sandbox.apple.com
        rootCertificates: [/etc/reconciler/AppleRootCA-G3.pem]   # optional; the bundled root by default
        rateLimit: {production: 40, sandbox: 4}                  # optional, per app and environment
        apps:
          - bundleId: com.example.one
            appAppleId: 1234567890          # required for production
            environments: [production, sandbox]
            key: {id: ONEKEY1234, issuer: 57246542-96fe-1a63-e053-0824d011072a, privateKeyPath: /run/secrets/AuthKey_ONEKEY1234.p8}
          - bundleId: com.example.two
            appAppleId: 2345678901
            environments: [production]
        """

    func load(_ text: String) throws -> ReconcilerConfiguration {
        try TemporaryDirectory.with("reconciler-config") { directory in
            let path = directory.file("reconciler.yaml")
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            return try ReconcilerConfiguration.load(file: path)
        }
    }

    @Test func theIssuesExampleLoadsAndMeansWhatItSays() throws {
        let configuration = try load(Self.example)
        #expect(
            configuration.targets.map(\.app.description) == [
                "com.example.one (Production)", "com.example.one (Sandbox)", "com.example.two (Production)",
            ])
        let one = configuration.targets[0], oneSandbox = configuration.targets[1], two = configuration.targets[2]
        #expect(one.app.appAppleId == 1_234_567_890)
        #expect(one.key?.id == "ONEKEY1234")
        #expect(two.key?.id == "2X9R4HXF34" && two.key?.privateKeyPath == "/run/secrets/AuthKey_2X9R4HXF34.p8")
        #expect(one.apiBaseURL == "https://api.storekit.apple.com" && oneSandbox.apiBaseURL == "https://api.storekit-sandbox.apple.com")
        #expect(one.rateLimit == 40 && oneSandbox.rateLimit == 4)
        #expect(configuration.rootCertificates == ["/etc/reconciler/AppleRootCA-G3.pem"])
        #expect(one.entitlement.sandboxEntitles)
        #expect(try configuration.targets(app: "com.example.one", environment: nil).count == 2)
        #expect(try configuration.targets(app: nil, environment: .sandbox).map(\.app.bundleId) == ["com.example.one"])
        #expect(throws: ReconcilerError.self) { try configuration.targets(app: "com.example.three", environment: nil) }
        // Routing: the signed bundle id and environment, and in production the app's Apple ID.
        #expect(configuration.target(bundleId: "com.example.two", environment: .production, appAppleId: 2_345_678_901)?.app == two.app)
        #expect(configuration.target(bundleId: "com.example.two", environment: .production, appAppleId: 1) == nil)
        #expect(configuration.target(bundleId: "com.example.two", environment: .sandbox, appAppleId: 2_345_678_901) == nil)
        #expect(configuration.target(bundleId: "com.example.one", environment: .sandbox, appAppleId: nil)?.app == oneSandbox.app)
    }

    @Test func theOptionalKeysOfThisVersion() throws {
        let configuration = try load(
            """
            key: {id: K, issuer: I, privateKeyPath: /k.p8}
            nonRenewingTerms: {com.example.pass.30d: 30d}
            sandboxEntitles: false
            entitleBillingRetry: true
            forwardTo: https://app.internal/apple
            giveUpAfter: 3
            knownApps: [com.example.legacy]
            apps:
              - bundleId: com.example.one
                environments: [sandbox]
                nonRenewingTerms: {com.example.pass.7d: 7d}
                sandboxEntitles: true
            """)
        let target = try #require(configuration.targets.first)
        #expect(target.app.environment == .sandbox && target.app.appAppleId == nil)
        #expect(target.entitlement.nonRenewingTerms == ["com.example.pass.30d": 30 * 86_400_000, "com.example.pass.7d": 7 * 86_400_000])
        #expect(target.entitlement.sandboxEntitles && target.entitlement.billingRetryEntitles)
        #expect(target.forwardTo == [ForwardingDestination(url: .inline("https://app.internal/apple"), signing: .process, key: "forwardTo")])
        #expect(configuration.giveUpAfter == 3)
        #expect(configuration.knownApps == ["com.example.legacy"])
        #expect(configuration.knownBundleIds == ["com.example.legacy", "com.example.one"])
    }

    /// `consumption.liveRequests`: `watch` unless said otherwise, the top level's for every app, an
    /// app's own over it.
    @Test func whetherLiveConsumptionRequestsCountIsSaidAtTheTopOrPerApp() throws {
        let configuration = try load(
            """
            key: {id: K, issuer: I, privateKeyPath: /k.p8}
            consumption: {liveRequests: ignore}
            apps:
              - {bundleId: com.example.one, appAppleId: 1}
              - {bundleId: com.example.two, appAppleId: 2, consumption: {liveRequests: watch}}
            """)
        #expect(configuration.targets.map(\.consumption.liveRequests) == [.ignore, .watch])
        let plain = try load("key: {id: K, issuer: I, privateKeyPath: /k.p8}\napps:\n  - {bundleId: a, appAppleId: 1}")
        #expect(plain.targets.map(\.consumption.liveRequests) == [.watch])
    }

    /// `consumption:` as a policy: the top level's for every app, an app's keys over it (products by
    /// product ID), `answerAfter` 2h and `automatic` false unless said; no policy without its keys.
    @Test func aConsumptionPolicyIsSaidAtTheTopOrPerAppAndMerged() throws {
        let configuration = try load(
            """
            key: {id: K, issuer: I, privateKeyPath: /k.p8}
            consumption:
              customerConsented: true
              deliveryStatus: delivered
              sampleContentProvided: false
              refundPreference: DECLINE
              products:
                com.example.coins.100: {refundPreference: GRANT_PRORATED, consumptionPercentage: 50000}
            apps:
              - {bundleId: com.example.one, appAppleId: 1}
              - bundleId: com.example.two
                appAppleId: 2
                consumption:
                  answerAfter: 30m
                  automatic: true
                  products: {com.example.lifetime: {deliveryStatus: UNDELIVERED_OTHER, consumptionPercentage: 0}}
            """)
        let one = try #require(configuration.targets[0].consumption.policy)
        #expect(one.customerConsented && !one.automatic && one.answerAfter == .seconds(7200))
        #expect(
            one.body(forProduct: "com.example.premium.monthly")
                == ConsumptionRequest(
                    customerConsented: true, deliveryStatus: .delivered, sampleContentProvided: false, refundPreference: .decline))
        #expect(
            one.body(forProduct: "com.example.coins.100")
                == ConsumptionRequest(
                    customerConsented: true, deliveryStatus: .delivered, sampleContentProvided: false, consumptionPercentage: 50_000,
                    refundPreference: .grantProrated))
        let two = try #require(configuration.targets[1].consumption.policy)
        #expect(two.automatic && two.answerAfter == .seconds(1800))
        #expect(Set(two.products.keys) == ["com.example.coins.100", "com.example.lifetime"])
        #expect(two.body(forProduct: "com.example.lifetime")?.deliveryStatus == .undeliveredOther)
        let plain = try load(
            "key: {id: K, issuer: I, privateKeyPath: /k.p8}\nconsumption: {liveRequests: ignore}\napps:\n  - {bundleId: a, appAppleId: 1}")
        #expect(plain.targets[0].consumption.policy == nil)
        // Without consent the policy loads, and gives no answer.
        let unconsented = try load(
            "key: {id: K, issuer: I, privateKeyPath: /k.p8}\nconsumption: {deliveryStatus: DELIVERED, sampleContentProvided: true}\n"
                + "apps:\n  - {bundleId: a, appAppleId: 1}")
        #expect(unconsented.targets[0].consumption.policy?.body(forProduct: nil) == nil)
    }

    /// A policy that breaks Apple's rules for Send Consumption Information is refused when the
    /// file loads, naming the key.
    @Test(arguments: [
        ("consumption: {customerConsented: true, sampleContentProvided: false}", "consumption.deliveryStatus"),
        ("consumption: {customerConsented: true, deliveryStatus: SHIPPED, sampleContentProvided: false}", "consumption.deliveryStatus"),
        ("consumption: {customerConsented: true, deliveryStatus: DELIVERED}", "consumption.sampleContentProvided"),
        (
            "consumption: {customerConsented: true, deliveryStatus: DELIVERED, sampleContentProvided: false, refundPreference: MAYBE}",
            "consumption.refundPreference"
        ),
        (
            "consumption: {customerConsented: true, deliveryStatus: DELIVERED, sampleContentProvided: false, consumptionPercentage: 10}",
            "consumption.consumptionPercentage"
        ),
        (
            "consumption: {customerConsented: true, deliveryStatus: UNDELIVERED_OTHER, sampleContentProvided: false, products: {p: {consumptionPercentage: 10}}}",
            "consumption.products.p.consumptionPercentage"
        ),
        (
            "consumption: {customerConsented: true, deliveryStatus: DELIVERED, sampleContentProvided: false, products: {p: {consumptionPercentage: 100001}}}",
            "consumption.products.p.consumptionPercentage"
        ),
        (
            "consumption: {customerConsented: true, deliveryStatus: DELIVERED, sampleContentProvided: false, refundPreference: GRANT_PRORATED, products: {p: {consumptionPercentage: 100000}}}",
            "consumption.products.p.consumptionPercentage"
        ),
        (
            "consumption: {customerConsented: true, deliveryStatus: DELIVERED, sampleContentProvided: false, answerAfter: 7200}",
            "consumption.answerAfter"
        ),
    ])
    func aConsumptionPolicyAgainstApplesRulesIsRefusedAtLoad(section: String, key: String) throws {
        let error = #expect(throws: ReconcilerError.self) {
            try load("key: {id: K, issuer: I, privateKeyPath: /k.p8}\n\(section)\napps:\n  - {bundleId: a, appAppleId: 1}")
        }
        #expect(error?.code == .invalidValue, "\(String(describing: error))")
        #expect(error?.key == key, "\(String(describing: error))")
    }

    /// `appApi` is off unless given; given, its port defaults to 8081 and its rate to the default share.
    @Test func theAppAPIIsOffUnlessConfigured() throws {
        let base = "key: {id: K, issuer: I, privateKeyPath: /k.p8}\napps:\n  - {bundleId: a, appAppleId: 1}"
        #expect(try load(base).appApi == nil)
        let configured = try load(base + "\nappApi: {tokenFile: /run/secrets/app-api/tokens}")
        #expect(configured.appApi == .init(tokenFile: "/run/secrets/app-api/tokens", port: 8081, refreshRateLimit: nil))
        #expect(configured.appApiTokenFile == "/run/secrets/app-api/tokens")
        let full = try load(base + "\nappApi: {tokenFile: /t, port: 9090, refreshRateLimit: 2.5}")
        #expect(full.appApi == .init(tokenFile: "/t", port: 9090, refreshRateLimit: 2.5))
    }

    /// Each mistake names the file and the key; none is taken for a default.
    @Test(arguments: [
        ("apps: []\nkey: {id: K, issuer: I, privateKeyPath: /k.p8}", ReconcilerError.Code.missingKey, "apps"),
        ("key: {id: K, issuer: I, privateKeyPath: /k.p8}\napps:\n  - bundleId: a\n    environments: [production]", .missingKey, "apps[0].appAppleId"),
        ("apps:\n  - bundleId: a\n    appAppleId: 1", .missingKey, "key"),
        ("key: {id: K, issuer: I}\napps:\n  - {bundleId: a, appAppleId: 1}", .missingKey, "key.privateKeyPath"),
        (
            "key: {id: K, issuer: I, privateKeyPath: /k.p8}\nrateLimt: {production: 40}\napps:\n  - {bundleId: a, appAppleId: 1}", .unknownKey,
            "rateLimt"
        ),
        (
            "key: {id: K, issuer: I, privateKeyPath: /k.p8}\napps:\n  - {bundleId: a, appAppleId: 1, enviroments: [sandbox]}", .unknownKey,
            "apps[0].enviroments"
        ),
        (
            "key: {id: K, issuer: I, privateKeyPath: /k.p8}\nrateLimit: {production: fast}\napps:\n  - {bundleId: a, appAppleId: 1}", .invalidValue,
            "rateLimit.production"
        ),
        (
            "key: {id: K, issuer: I, privateKeyPath: /k.p8}\napps:\n  - {bundleId: a, appAppleId: 1, environments: [staging]}", .invalidValue,
            "apps[0].environments[0]"
        ),
        (
            "key: {id: K, issuer: I, privateKeyPath: /k.p8}\napps:\n  - {bundleId: a, appAppleId: 1}\n  - {bundleId: a, appAppleId: 1}",
            .duplicateApp, "apps[1].bundleId"
        ),
        (
            "key: {id: K, issuer: I, privateKeyPath: /k.p8}\napps:\n  - {bundleId: a, appAppleId: 1, nonRenewingTerms: {p: forever}}", .invalidValue,
            "apps[0].nonRenewingTerms.p"
        ),
        (
            "key: {id: K, issuer: I, privateKeyPath: /k.p8}\nknownApps: [com.example.two, '']\napps:\n  - {bundleId: a, appAppleId: 1}",
            .invalidValue, "knownApps[1]"
        ),
        (
            "key: {id: K, issuer: I, privateKeyPath: /k.p8}\nconsumption: {liveRequests: sometimes}\napps:\n  - {bundleId: a, appAppleId: 1}",
            .invalidValue, "consumption.liveRequests"
        ),
        (
            "key: {id: K, issuer: I, privateKeyPath: /k.p8}\napps:\n  - {bundleId: a, appAppleId: 1, consumption: {live: ignore}}", .unknownKey,
            "apps[0].consumption.live"
        ),
        (
            "key: {id: K, issuer: I, privateKeyPath: /k.p8}\nappApi: {port: 8081}\napps:\n  - {bundleId: a, appAppleId: 1}", .missingKey,
            "appApi.tokenFile"
        ),
        (
            "key: {id: K, issuer: I, privateKeyPath: /k.p8}\nappApi: {tokenFile: /t, port: 0}\napps:\n  - {bundleId: a, appAppleId: 1}",
            .invalidValue,
            "appApi.port"
        ),
        (
            "key: {id: K, issuer: I, privateKeyPath: /k.p8}\nappApi: {tokenFile: /t, refreshRateLimit: -1}\napps:\n  - {bundleId: a, appAppleId: 1}",
            .invalidValue, "appApi.refreshRateLimit"
        ),
        (
            "key: {id: K, issuer: I, privateKeyPath: /k.p8}\nappApi: {tokenFile: /t, token: s3cret}\napps:\n  - {bundleId: a, appAppleId: 1}",
            .unknownKey, "appApi.token"
        ),
    ])
    func aMistakeNamesTheFileAndTheKey(text: String, code: ReconcilerError.Code, key: String) throws {
        let error = #expect(throws: ReconcilerError.self) { try load(text) }
        #expect(error?.code == code, "\(String(describing: error))")
        #expect(error?.key == key, "\(String(describing: error))")
        #expect(error?.description.contains("reconciler-config-") == true)
    }

    /// `forwardTo` as a mapping names where the URL and the HMAC secret are read, so the file holds
    /// no secret; an app's own `forwardTo` wins over the top level's; the plain URL is signed by the
    /// process's secret.
    @Test func forwardToTakesAMappingThatNamesWhereTheURLAndTheSecretAreRead() throws {
        let configuration = try load(
            """
            key: {id: K, issuer: I, privateKeyPath: /k.p8}
            forwardTo: https://every.internal/apple
            apps:
              - bundleId: com.example.one
                appAppleId: 1
                forwardTo: {urlEnv: ONE_HOOK_URL, secretFile: /run/secrets/one-hook}
              - bundleId: com.example.two
                appAppleId: 2
                forwardTo:
                  urlFile: /run/secrets/two-hook-url
                  secretEnv: TWO_HOOK_SECRET
              - bundleId: com.example.three
                appAppleId: 3
                forwardTo: {url: "https://three.internal/apple", unsigned: true}
              - bundleId: com.example.four
                appAppleId: 4
            """)
        #expect(
            configuration.targets.map(\.forwardTo) == [
                [
                    ForwardingDestination(
                        url: .environment("ONE_HOOK_URL"), signing: .secret(.file("/run/secrets/one-hook")), key: "apps[0].forwardTo")
                ],
                [
                    ForwardingDestination(
                        url: .file("/run/secrets/two-hook-url"), signing: .secret(.environment("TWO_HOOK_SECRET")), key: "apps[1].forwardTo")
                ],
                [ForwardingDestination(url: .inline("https://three.internal/apple"), signing: .unsigned, key: "apps[2].forwardTo")],
                [ForwardingDestination(url: .inline("https://every.internal/apple"), signing: .process, key: "forwardTo")],
            ])
    }

    /// `forwardTo` as a list of named targets, each for some environments and types: an app in
    /// both environments forwards each environment's notifications to the targets that receive it
    /// (several for one environment allowed), each with its own secret (so its own queue rows and
    /// metrics); a list target without a name, a name twice, an unknown environment and a type not
    /// spelled as the run report prints it are refused by key.
    @Test func forwardToTakesAListOfTargetsEachForItsEnvironmentsAndTypes() throws {
        let configuration = try load(
            """
            key: {id: K, issuer: I, privateKeyPath: /k.p8}
            apps:
              - bundleId: com.example.one
                appAppleId: 1
                environments: [production, sandbox]
                forwardTo:
                  - {name: app, urlEnv: APP_HOOK_URL, secretEnv: APP_HOOK_SECRET, environments: [production]}
                  - {name: staging, url: "https://staging.internal/apple", unsigned: true, environments: [sandbox]}
                  - {name: refunds, url: "https://refunds.internal/apple", unsigned: true, types: [REFUND, DID_CHANGE_RENEWAL_STATUS/AUTO_RENEW_DISABLED]}
            """)
        #expect(
            configuration.targets.map { target in
                "\(target.app.environment.rawValue) " + target.forwardTo.map { "\($0.name ?? "-") \($0.key)" }.joined(separator: ", ")
            } == [
                "Production app apps[0].forwardTo[0], refunds apps[0].forwardTo[2]",
                "Sandbox staging apps[0].forwardTo[1], refunds apps[0].forwardTo[2]",
            ])
        #expect(configuration.targets[0].forwardTo[0].signing == .secret(.environment("APP_HOOK_SECRET")))
        #expect(configuration.targets[1].forwardTo[0].signing == .unsigned)
        #expect(configuration.targets[0].forwardTo[0].types == nil)
        let refunds = try #require(configuration.targets[0].forwardTo.last?.types)
        #expect(refunds.matches(type: "REFUND", subtype: nil))
        #expect(refunds.matches(type: "DID_CHANGE_RENEWAL_STATUS", subtype: "AUTO_RENEW_DISABLED"))
        #expect(!refunds.matches(type: "DID_CHANGE_RENEWAL_STATUS", subtype: "AUTO_RENEW_ENABLED"))
        #expect(!refunds.matches(type: "SUBSCRIBED", subtype: "INITIAL_BUY"))
        for (list, code, key) in [
            ("[{url: 'https://a.internal/x', unsigned: true}]", ReconcilerError.Code.missingKey, "apps[0].forwardTo[0].name"),
            (
                "[{name: a, url: 'https://a.internal/x', unsigned: true, environments: [production]}, {name: a, url: 'https://b.internal/x', unsigned: true, environments: [sandbox]}]",
                .invalidValue, "apps[0].forwardTo[1].name"
            ),
            ("[{name: a, url: 'https://a.internal/x', unsigned: true, types: [refund]}]", .invalidValue, "apps[0].forwardTo[0].types"),
            ("[{name: a, url: 'https://a.internal/x', unsigned: true, types: ['REFUND/']}]", .invalidValue, "apps[0].forwardTo[0].types"),
            ("[{name: a, url: 'https://a.internal/x', unsigned: true, types: []}]", .invalidValue, "apps[0].forwardTo[0].types"),
            (
                "[{name: a, url: 'https://a.internal/x', unsigned: true, environments: [staging]}]", .invalidValue,
                "apps[0].forwardTo[0].environments[0]"
            ),
        ] {
            let error = #expect(throws: ReconcilerError.self) {
                try load("key: {id: K, issuer: I, privateKeyPath: /k.p8}\napps:\n  - {bundleId: a, appAppleId: 1, forwardTo: \(list)}")
            }
            #expect(error?.code == code, "\(list): \(String(describing: error))")
            #expect(error?.key == key, "\(list): \(String(describing: error))")
        }
    }

    /// A `forwardTo` mapping that names no URL, two of them, no secret (without `unsigned: true`),
    /// or a secret written into the file is refused, naming the key and never the value.
    @Test(arguments: [
        ("{secretFile: /s}", ReconcilerError.Code.missingKey, "apps[0].forwardTo.url"),
        ("{url: https://a.internal/x, urlEnv: HOOK, secretFile: /s}", .invalidValue, "apps[0].forwardTo.url"),
        ("{url: https://a.internal/x}", .missingKey, "apps[0].forwardTo.secretFile"),
        ("{url: https://a.internal/x, unsigned: false}", .missingKey, "apps[0].forwardTo.secretFile"),
        ("{url: https://a.internal/x, secretFile: /s, secretEnv: S}", .invalidValue, "apps[0].forwardTo.secretFile"),
        ("{url: https://a.internal/x, secretFile: /s, unsigned: true}", .invalidValue, "apps[0].forwardTo.unsigned"),
        ("{url: https://a.internal/x, secret: hunter2-the-secret}", .invalidValue, "apps[0].forwardTo.secret"),
        ("{url: https://a.internal/x, sekretFile: /s}", .unknownKey, "apps[0].forwardTo.sekretFile"),
        ("{urlFile: '', secretFile: /s}", .invalidValue, "apps[0].forwardTo.urlFile"),
        ("[https://a.internal/x]", .invalidValue, "apps[0].forwardTo"),
    ])
    func aForwardToMistakeNamesTheKey(value: String, code: ReconcilerError.Code, key: String) throws {
        let error = #expect(throws: ReconcilerError.self) {
            try load("key: {id: K, issuer: I, privateKeyPath: /k.p8}\napps:\n  - {bundleId: a, appAppleId: 1, forwardTo: \(value)}")
        }
        #expect(error?.code == code, "\(String(describing: error))")
        #expect(error?.key == key, "\(String(describing: error))")
        #expect(error?.description.contains("hunter2") == false)
    }

    /// A YAML syntax error says where it is (line and column), never what the line holds: the
    /// line may be a `forwardTo` URL with its credentials.
    @Test(arguments: [
        // An unclosed quote: the scanner's error.
        ("apps:\n  - bundleId: a\n    forwardTo: \"https://hooks:hunter2@app.internal/apple?token=hunter2\n", "line 3"),
        // A tab where YAML wants spaces, after the URL.
        ("apps:\n  - bundleId: a\n    forwardTo: https://hooks:hunter2@app.internal/apple\n\t  appAppleId: 1\n", "line 4"),
        // A key twice in one mapping.
        (
            "apps:\n  - bundleId: a\n    forwardTo: https://hooks:hunter2@app.internal/apple\n    forwardTo: https://hooks:hunter2@b.internal/x\n",
            "line"
        ),
        // Not UTF-8 (the reader's error), after the URL.
        ("apps:\n  - bundleId: a\n    forwardTo: https://hooks:hunter2@app.internal/apple\n    x: \u{01}\n", "line 4"),
    ])
    func aYAMLErrorSaysWhereNotWhat(text: String, position: String) throws {
        let error = #expect(throws: ReconcilerError.self) { try load(text) }
        #expect(error?.code == .invalidYAML, "\(String(describing: error))")
        let written = "\(error?.description ?? "") \(error?.debugDescription ?? "")"
        #expect(!written.contains("hunter2") && !written.contains("app.internal"), "\(written)")
        #expect(written.contains(position) && written.contains("column"), "\(written)")
    }

    @Test func aFileThatIsNotYAMLOrMissing() throws {
        #expect((#expect(throws: ReconcilerError.self) { try load("key: [unclosed") })?.code == .invalidYAML)
        let missing = #expect(throws: ReconcilerError.self) { try ReconcilerConfiguration.load(file: "/nonexistent/reconciler.yaml") }
        #expect(missing?.code == .unreadable)
        #expect(missing?.description.contains("/nonexistent/reconciler.yaml") == true)
    }
}
