import AppStoreServer
import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import MockAppStore
import NIOFoundationCompat
import PostgresNIO
import Reconciler
import ReconcilerDomain
import ReconcilerMetrics
import ReconcilerShared
import ReconcilerStore
import TestSupport
import Testing
import WebhookServer

/// The app API (`appApi` in `serve`) against a real PostgreSQL, its requests sent straight to its
/// router in process (HummingbirdTesting's `.router`: the same routes, no port).
@Suite struct AppAPITests {
    let app: TestApp
    init() throws { app = try TestApp() }

    static let token = "app-api-test-token-5f0c2a"

    /// One answer: its status, headers and body.
    struct Reply {
        var status: Int
        var headers: HTTPFields
        var text: String
        var json: [String: Any] { (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:] }
        var purchases: [[String: Any]] { json["purchases"] as? [[String: Any]] ?? [] }
    }

    struct Client: Sendable {
        let client: any TestClientProtocol

        func get(_ uri: String, token: String? = AppAPITests.token, authorization: String? = nil) async throws -> Reply {
            var headers: HTTPFields = [:]
            if let header = authorization ?? token.map({ "Bearer \($0)" }) { headers[.authorization] = header }
            let response = try await client.execute(uri: uri, method: .get, headers: headers, body: nil)
            return Reply(status: Int(response.status.code), headers: response.headers, text: String(buffer: response.body))
        }

        func post(_ uri: String, body: String, token: String? = AppAPITests.token) async throws -> Reply {
            var headers: HTTPFields = [.contentType: "application/json"]
            if let token { headers[.authorization] = "Bearer \(token)" }
            let response = try await client.execute(uri: uri, method: .post, headers: headers, body: ByteBuffer(string: body))
            return Reply(status: Int(response.status.code), headers: response.headers, text: String(buffer: response.body))
        }

        func handOver(_ signedTransaction: String, token: String? = AppAPITests.token) async throws -> Reply {
            let body = String(decoding: try JSONEncoder().encode(["signedTransaction": signedTransaction]), as: UTF8.self)
            return try await post("/v1/transactions", body: body, token: token)
        }
    }

    /// Runs `body` with the app API of the test app (its tokens in a file of `directory`) over `db`.
    func withAPI(
        _ db: TestDatabase, in directory: TemporaryDirectory, metrics: MetricsRegistry = MetricsRegistry(bundleId: nil, environment: nil),
        logger: Logger = TestDatabase.logger, handlers: [NotificationHandler]? = nil, tokenClock: any MonotonicClock = .system,
        _ body: @Sendable (Client) async throws -> Void
    ) async throws {
        let tokenFile = directory.file("app-api-tokens")
        if !FileManager.default.fileExists(atPath: tokenFile) {
            try "# the app's backend\n\(Self.token)\n".write(toFile: tokenFile, atomically: true, encoding: .utf8)
        }
        let server = AppAPIServer(
            configuration: .init(), tokens: try AppAPITokens(path: tokenFile, logger: logger, clock: tokenClock),
            handlers: try handlers ?? [app.handler(db)],
            database: db.database, metrics: metrics, logger: logger)
        try await server.makeApplication().test(.router) { client in try await body(Client(client: client)) }
    }

    static let base = "/v1/purchases?bundleId=\(TestApp.bundleId)&environment=production"

    /// Stores three purchases through the live path: 7100 renewed by transaction 7101, 7200 with
    /// an app account token, 7300 whose customer a run checked at `checkedAt`.
    func seed(_ db: TestDatabase, appAccountToken: String, checkedAt: Int64) async throws {
        let handler = try app.handler(db)
        let t0 = app.start
        var withToken = app.subscription(original: "7200", period: 0, signedDate: t0)
        withToken.appAccountToken = appAccountToken
        for payload in [
            try app.notification(
                .subscribed, .initialBuy, signedDate: t0, transaction: app.subscription(original: "7100", period: 0, signedDate: t0)),
            try app.notification(
                .didRenew, signedDate: t0 + 1000,
                transaction: app.subscription(original: "7100", period: 1, signedDate: t0 + 1000, transactionId: "7101")),
            try app.notification(.subscribed, .initialBuy, signedDate: t0, transaction: withToken),
            try app.notification(
                .subscribed, .initialBuy, signedDate: t0, transaction: app.subscription(original: "7300", period: 0, signedDate: t0)),
        ] {
            _ = try await handler.handle(signedPayload: payload, source: .webhook)
        }
        try await db.execute("UPDATE purchases SET history_checked_at_ms = \(checkedAt) WHERE original_transaction_id = '7300'")
    }

    @Test func everyLookupKeyAnswersTheExportShapeWithCheckedAtAndFresh() async throws {
        try await TestDatabase.with { db in
            try await TemporaryDirectory.with { directory in
                let token = "7e3fb20b-4cdb-47cc-936d-99d65f608138"
                let checkedAt = app.start + 5000
                try await seed(db, appAccountToken: token, checkedAt: checkedAt)
                // What `export` prints for each purchase.
                var lines: [String: String] = [:]
                try await PurchaseStore(database: db.database, scope: app.scope()).exportPurchases(apps: [app.scope().target], in: db.database) {
                    lines[$0.originalTransactionId] = try $0.jsonLine()
                }
                let exported = lines
                try await withAPI(db, in: directory) { api in
                    func purchases(_ key: String) async throws -> [[String: Any]] {
                        let reply = try await api.get("\(Self.base)&\(key)")
                        #expect(reply.status == 200, "\(key): \(reply.text)")
                        #expect(reply.headers[.contentType] == "application/json")
                        return reply.purchases
                    }
                    for key in ["originalTransactionId=7100", "transactionId=7100", "transactionId=7101"] {
                        let found = try await purchases(key)
                        #expect(found.count == 1, "\(key)")
                        #expect(found.first?["latestTransactionId"] as? String == "7101", "\(key)")
                        #expect(found.first?["entitled"] as? Bool == true, "\(key)")
                        #expect(found.first?["checkedAt"] is NSNull, "\(key): never checked at Apple")
                        #expect(found.first?["fresh"] as? Bool == false, "\(key)")
                    }
                    // The export's line, plus checkedAt and fresh.
                    let row = try #require(try await purchases("originalTransactionId=7300").first)
                    #expect((row["checkedAt"] as? NSNumber)?.int64Value == checkedAt)
                    var exportPart = row
                    exportPart["checkedAt"] = nil
                    exportPart["fresh"] = nil
                    let exportLine = try #require(exported["7300"])
                    #expect(NSDictionary(dictionary: exportPart) == (try JSONSerialization.jsonObject(with: Data(exportLine.utf8)) as? NSDictionary))
                    // The token in either letter case, as repair matches it.
                    for spelling in [token, token.uppercased()] {
                        let found = try await purchases("appAccountToken=\(spelling)")
                        #expect(found.map { $0["originalTransactionId"] as? String } == ["7200"], "\(spelling)")
                        #expect(found.first?["appAccountToken"] as? String == token)
                    }
                    // No match is an empty list, not an error.
                    for key in ["originalTransactionId=7999", "transactionId=7999", "appAccountToken=\(UUID().uuidString)"] {
                        #expect(try await purchases(key).isEmpty, "\(key)")
                    }
                    // The app's own user ID, as `reconciler import` stores it on the customer's purchases.
                    try await db.execute("UPDATE purchases SET app_user_id = 'user-42' WHERE original_transaction_id = '7300'")
                    let byUser = try await purchases("appUserId=user-42")
                    #expect(byUser.map { $0["originalTransactionId"] as? String } == ["7300"])
                    #expect(byUser.first?["appUserId"] as? String == "user-42")
                    #expect(try await purchases("appUserId=user-43").isEmpty)
                }
            }
        }
    }

    @Test func badQueriesAndUnconfiguredAppsAreRefusedWithTheirCodesAndChangeNothing() async throws {
        try await TestDatabase.with { db in
            try await TemporaryDirectory.with { directory in
                try await seed(db, appAccountToken: UUID().uuidString.lowercased(), checkedAt: app.start)
                let before = try await db.stateFingerprint()
                try await withAPI(db, in: directory) { api in
                    let refused: [(String, Int, String)] = [
                        ("/v1/purchases?environment=production&transactionId=7100", 400, "INVALID_QUERY"),
                        ("/v1/purchases?bundleId=\(TestApp.bundleId)&transactionId=7100", 400, "INVALID_QUERY"),
                        ("/v1/purchases?bundleId=\(TestApp.bundleId)&environment=Production&transactionId=7100", 400, "INVALID_QUERY"),
                        ("/v1/purchases?bundleId=\(TestApp.bundleId)&environment=PRODUCTION&transactionId=7100", 400, "INVALID_QUERY"),
                        ("/v1/purchases?BundleId=\(TestApp.bundleId)&environment=production&transactionId=7100", 400, "INVALID_QUERY"),
                        ("\(Self.base)&TransactionId=7100", 400, "INVALID_QUERY"),
                        ("\(Self.base)&transactionid=7100", 400, "INVALID_QUERY"),
                        ("\(Self.base)&orderId=MQ5Q7X2ZYB", 400, "INVALID_QUERY"),
                        ("\(Self.base)&transactionId=7100&refresh=Always", 400, "INVALID_QUERY"),
                        ("\(Self.base)", 400, "INVALID_QUERY"),
                        ("\(Self.base)&transactionId=7100&originalTransactionId=7100", 400, "INVALID_QUERY"),
                        ("\(Self.base)&transactionId=7100&transactionId=7101", 400, "INVALID_QUERY"),
                        ("\(Self.base)&transactionId=71x0", 400, "INVALID_QUERY"),
                        ("\(Self.base)&transactionId=", 400, "INVALID_QUERY"),
                        ("\(Self.base)&appAccountToken=not-a-uuid", 400, "INVALID_QUERY"),
                        ("/v1/purchases?bundleId=\(TestApp.bundleId)&environment=sandbox&transactionId=7100", 503, "APP_NOT_CONFIGURED"),
                        ("/v1/purchases?bundleId=com.example.other&environment=production&transactionId=7100", 503, "APP_NOT_CONFIGURED"),
                    ]
                    for (uri, status, code) in refused {
                        let reply = try await api.get(uri)
                        #expect(reply.status == status, "\(uri): \(reply.text)")
                        #expect(reply.json["error"] as? String == code, "\(uri)")
                        #expect(Set(reply.json.keys) == ["error", "detail"], "\(uri)")
                        #expect((reply.json["detail"] as? String)?.isEmpty == false, "\(uri)")
                    }
                }
                #expect(try await db.stateFingerprint() == before)
            }
        }
    }

    @Test func withoutAListedTokenItIs401WithNoDataAndTokensRotateWithoutARestart() async throws {
        try await TestDatabase.with { db in
            try await TemporaryDirectory.with { directory in
                try await seed(db, appAccountToken: UUID().uuidString.lowercased(), checkedAt: app.start)
                let records = RecordingLogHandler.Records()
                let logger = Logger(label: "app-api") { _ in RecordingLogHandler(records) }
                let metrics = MetricsRegistry(bundleId: nil, environment: nil)
                let rotated = "app-api-rotated-token-91d7e4"
                // The file is looked at once a second at most (not on every request): the test moves that second.
                let clock = ManualClock()
                try await withAPI(db, in: directory, metrics: metrics, logger: logger, tokenClock: clock) { api in
                    let uri = "\(Self.base)&originalTransactionId=7100"
                    #expect(PrometheusText.value(of: metrics, "reconciler_app_api_unauthorized_total") == 0)
                    let refusals = [
                        try await api.get(uri, token: nil), try await api.get(uri, token: "wrong"), try await api.get(uri, token: Self.token + "x"),
                        try await api.get(uri, token: String(Self.token.dropLast())), try await api.get(uri, authorization: "Basic \(Self.token)"),
                        try await api.get(uri, authorization: Self.token),
                    ]
                    for reply in refusals {
                        #expect(reply.status == 401)
                        #expect(reply.headers[.wwwAuthenticate] == "Bearer")
                        #expect(reply.json["error"] as? String == "UNAUTHORIZED")
                        #expect(Set(reply.json.keys) == ["error", "detail"])
                        #expect(!reply.text.contains("7100") && !reply.text.contains(TestApp.bundleId), "no data: \(reply.text)")
                    }
                    #expect(PrometheusText.value(of: metrics, "reconciler_app_api_unauthorized_total") == Double(refusals.count))
                    // The scheme in any letter case.
                    #expect(try await api.get(uri, authorization: "bearer \(Self.token)").status == 200)
                    // Rotation: the file rewritten; within the second it was last looked at, the tokens
                    // last read still hold; then the old token is refused and the new one taken.
                    try "# rotated\n\n  \(rotated)  \n".write(toFile: directory.file("app-api-tokens"), atomically: true, encoding: .utf8)
                    clock.advance(by: .milliseconds(999))
                    #expect(try await api.get(uri).status == 200)
                    #expect(try await api.get(uri, token: rotated).status == 401)
                    clock.advance(by: .milliseconds(1))
                    #expect(try await api.get(uri).status == 401)
                    let after = try await api.get(uri, token: rotated)
                    #expect(after.status == 200)
                    #expect(after.purchases.count == 1)
                    // Two tokens at once while a rotation rolls out; a comment is no token.
                    try "\(Self.token)\n# \(rotated)\n".write(toFile: directory.file("app-api-tokens"), atomically: true, encoding: .utf8)
                    clock.advance(by: .seconds(1))
                    #expect(try await api.get(uri).status == 200)
                    #expect(try await api.get(uri, token: rotated).status == 401)
                    #expect(try await api.get(uri, token: "# \(rotated)").status == 401)
                }
                // Neither token reached a log line or a metric.
                let logged = records.messages.joined(separator: "\n")
                #expect(logged.contains("401"), "the refusals are logged")
                for secret in [Self.token, rotated] {
                    #expect(!logged.contains(secret))
                    #expect(!metrics.exposition().contains(secret))
                }
            }
        }
    }

    @Test func aTokenFileThatIsMissingOrListsNoTokenIsRefusedAtStart() throws {
        try TemporaryDirectory.with { directory in
            let logger = Logger(label: "test")
            #expect(throws: ReconcilerError.self) { try AppAPITokens(path: directory.file("missing"), logger: logger) }
            try "# only a comment\n\n".write(toFile: directory.file("empty"), atomically: true, encoding: .utf8)
            let error = #expect(throws: ReconcilerError.self) { try AppAPITokens(path: directory.file("empty"), logger: logger) }
            #expect(error?.code == .invalidValue)
        }
    }
}

extension AppAPITests {
    /// The app hands over what StoreKit gave it: recorded at once (a purchase Apple has not notified
    /// yet), with a feed row of source `app`; an older value never regresses the stored state;
    /// forgeries, malformed bodies and apps not served change nothing.
    @Test func aHandedOverTransactionIsRecordedOnceAndForgeriesAndOtherAppsAreRefused() async throws {
        try await TestDatabase.with { db in
            try await TemporaryDirectory.with { directory in
                let t0 = app.start
                let first = try app.authority.signer.sign(app.subscription(original: "7500", period: 0, signedDate: t0))
                let renewed = try app.authority.signer.sign(
                    app.subscription(original: "7500", period: 1, signedDate: t0 + 1000, transactionId: "7501"))
                try await withAPI(db, in: directory) { api in
                    let reply = try await api.handOver(first)
                    #expect(reply.status == 200, "\(reply.text)")
                    let purchase = try #require(reply.json["purchase"] as? [String: Any])
                    #expect(purchase["originalTransactionId"] as? String == "7500")
                    #expect(purchase["latestTransactionId"] as? String == "7500")
                    #expect(purchase["entitled"] as? Bool == true)
                    #expect(purchase["fresh"] as? Bool == false)
                    #expect(Set(purchase.keys).isSuperset(of: ["checkedAt", "productId", "expiresDate", "bundleId", "environment"]))
                    #expect(
                        try await db.count("SELECT count(*) FROM purchase_changes WHERE source = 'app' AND original_transaction_id = '7500'") == 1)
                    // The same value again changes nothing; the renewal moves the purchase on; the first
                    // value once more does not move it back.
                    #expect(try await api.handOver(first).status == 200)
                    #expect(try await db.count("SELECT count(*) FROM purchase_changes WHERE original_transaction_id = '7500'") == 1)
                    #expect((try await api.handOver(renewed).json["purchase"] as? [String: Any])?["latestTransactionId"] as? String == "7501")
                    #expect((try await api.handOver(first).json["purchase"] as? [String: Any])?["latestTransactionId"] as? String == "7501")
                    let lookedUp = try await api.get("\(Self.base)&transactionId=7501")
                    #expect(lookedUp.purchases.first?["latestTransactionId"] as? String == "7501")

                    let fingerprint = try await db.stateFingerprint()
                    let stranger = try SigningCertificateAuthority()
                    let forged = try stranger.signer.sign(app.subscription(original: "7600", period: 0, signedDate: t0))
                    var tampered = first.split(separator: ".").map(String.init)
                    tampered[1] = String(
                        try app.authority.signer.sign(app.subscription(original: "7600", period: 0, signedDate: t0)).split(separator: ".")[1])
                    var otherApp = app.subscription(original: "7700", period: 0, signedDate: t0)
                    otherApp.bundleId = "com.example.other"
                    var sandbox = app.subscription(original: "7800", period: 0, signedDate: t0)
                    sandbox.environment = .sandbox
                    let refused: [(String, String, Int, String?)] = [
                        ("another CA", #"{"signedTransaction":"\#(forged)"}"#, 400, nil),
                        ("a payload swapped in", #"{"signedTransaction":"\#(tampered.joined(separator: "."))"}"#, 400, nil),
                        ("not a JWS", #"{"signedTransaction":"abc"}"#, 400, nil),
                        ("not JSON", "signedTransaction=abc", 400, "MALFORMED_BODY"),
                        ("no member", "{}", 400, "MALFORMED_BODY"),
                        ("another app", #"{"signedTransaction":"\#(try app.authority.signer.sign(otherApp))"}"#, 503, "APP_NOT_CONFIGURED"),
                        ("another environment", #"{"signedTransaction":"\#(try app.authority.signer.sign(sandbox))"}"#, 503, "APP_NOT_CONFIGURED"),
                    ]
                    for (name, body, status, code) in refused {
                        let reply = try await api.post("/v1/transactions", body: body)
                        #expect(reply.status == status, "\(name): \(reply.text)")
                        #expect(Set(reply.json.keys) == ["error", "detail"], "\(name): \(reply.text)")
                        if let code { #expect(reply.json["error"] as? String == code, "\(name)") }
                    }
                    let unauthorized = try await api.handOver(
                        try app.authority.signer.sign(app.subscription(original: "7900", period: 0, signedDate: t0)), token: nil)
                    #expect(unauthorized.status == 401)
                    #expect(try await db.stateFingerprint() == fingerprint)
                }
            }
        }
    }

    /// A transaction Apple really signed (a consumable of com.goodheartapp in the sandbox) is
    /// recorded when that app is served with Apple's root; trusted but not served, it is 503; with
    /// roots that do not include Apple's, 400.
    @Test func aRealAppleSignedTransactionIsRecordedForItsAppOnly() async throws {
        let jws = try String(
            contentsOf: Repository.root.appendingPathComponent("Tests/UnitTests/AppStoreServer/Fixtures/apple-signed/08-transaction-sandbox.jws"),
            encoding: .utf8
        ).trimmingCharacters(in: .whitespacesAndNewlines)
        try await TestDatabase.with { db in
            try await TemporaryDirectory.with { directory in
                let apple = NotificationHandler(
                    verifier: try SignedDataVerifier(
                        configuration: .init(rootCertificates: [TrustedRoots.appleRootCAG3], bundleId: "com.goodheartapp", environment: .sandbox)),
                    database: db.database)
                var trusting = app.verifierConfiguration
                trusting.rootCertificates.append(TrustedRoots.appleRootCAG3)
                let notServed = NotificationHandler(verifier: try SignedDataVerifier(configuration: trusting), database: db.database)
                try await withAPI(db, in: directory, handlers: [try app.handler(db)]) { api in
                    let reply = try await api.handOver(jws)
                    #expect(reply.status == 400, "\(reply.text)")
                }
                try await withAPI(db, in: directory, handlers: [notServed]) { api in
                    let reply = try await api.handOver(jws)
                    #expect(reply.json["error"] as? String == "APP_NOT_CONFIGURED", "\(reply.text)")
                }
                #expect(try await db.count("SELECT count(*) FROM purchases") == 0)
                try await withAPI(db, in: directory, handlers: [notServed, apple]) { api in
                    let reply = try await api.handOver(jws)
                    #expect(reply.status == 200, "\(reply.text)")
                    let purchase = try #require(reply.json["purchase"] as? [String: Any])
                    #expect(purchase["bundleId"] as? String == "com.goodheartapp")
                    #expect(purchase["environment"] as? String == "Sandbox")
                }
                #expect(try await db.count("SELECT count(*) FROM purchase_changes WHERE source = 'app' AND bundle_id = 'com.goodheartapp'") == 1)
            }
        }
    }
}

extension AppAPITests {
    /// The document names every endpoint (EndToEndTests' AppAPIServeTests validates it with
    /// openapi-spec-validator, a process this stage does not start).
    @Test
    func theOpenAPIDocumentNamesEveryEndpoint() async throws {
        try await TestDatabase.with { db in
            try await TemporaryDirectory.with { directory in
                try await withAPI(db, in: directory) { api in
                    #expect(try await api.get("/v1/openapi.json", token: nil).status == 401)
                    let reply = try await api.get("/v1/openapi.json")
                    #expect(reply.status == 200)
                    #expect(reply.json["openapi"] as? String == "3.1.0")
                    let paths = try #require(reply.json["paths"] as? [String: Any])
                    #expect(Set(paths.keys) == ["/v1/purchases", "/v1/transactions", "/v1/consumption/{transactionId}", "/v1/openapi.json"])
                }
            }
        }
    }
}

extension PrometheusText {
    /// A family's value in a registry's exposition (`nil` when absent).
    static func value(of metrics: MetricsRegistry, _ name: String) -> Double? {
        (try? PrometheusText(parsing: metrics.exposition()))?.value(name)
    }
}
