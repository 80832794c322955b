import AppStoreServer
import AsyncHTTPClient
import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import MockAppStore
import NIOFoundationCompat
import NIOHTTP1
import PostgresNIO
import Reconciler
import ReconcilerDomain
import ReconcilerMetrics
import ReconcilerShared
import Synchronization
import TestSupport
import Testing
import WebhookServer

/// `POST /notifications` against a real PostgreSQL: over real HTTP where the listening server is the point,
/// otherwise straight into the server's router in process (HummingbirdTesting's `.router`), which runs the
/// same routes and handler without a port.
@Suite struct WebhookServerTests {
    let app: TestApp
    init() throws { app = try TestApp() }

    /// Runs the server on a free port for the duration of `body`.
    func withServer(
        _ db: TestDatabase, maximumBodySize: Int = 256 * 1024, handler: NotificationHandler? = nil,
        _ body: (String) async throws -> Void
    ) async throws {
        let server = WebhookServer(
            configuration: .init(host: "127.0.0.1", port: 0, maximumBodySize: maximumBodySize),
            handler: try handler ?? app.handler(db), logger: TestDatabase.logger)
        try await withServer(server, body)
    }

    /// Runs `server` on a free port for the duration of `body`.
    func withServer(_ server: WebhookServer, _ body: (String) async throws -> Void) async throws {
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let application = server.makeApplication { port in continuation.yield(port) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await application.run() }
            defer { group.cancelAll() }
            var iterator = ports.makeAsyncIterator()
            let port = try #require(await iterator.next())
            try await body("http://127.0.0.1:\(port)")
        }
    }

    /// Sends the requests of `body` straight to the server's router, in process: no port, no HTTP client.
    func withRouter(
        _ db: TestDatabase, maximumBodySize: Int = 256 * 1024, handler: NotificationHandler? = nil, now: Timestamp = .now,
        _ body: @Sendable (RouterClient) async throws -> Void
    ) async throws {
        let server = WebhookServer(
            configuration: .init(maximumBodySize: maximumBodySize, now: { now }), handler: try handler ?? app.handler(db),
            logger: TestDatabase.logger)
        try await server.makeApplication().test(.router) { client in try await body(RouterClient(client: client)) }
    }

    /// HummingbirdTesting's client answering with the same ``HTTP/Reply`` as the real-HTTP tests.
    struct RouterClient: Sendable {
        let client: any TestClientProtocol

        func post(_ path: String, body: Data) async throws -> HTTP.Reply {
            let response = try await client.execute(
                uri: path, method: .post, headers: [.contentType: "application/json"],
                body: ByteBuffer(data: body))
            return HTTP.Reply(status: Int(response.status.code), body: Data(buffer: response.body))
        }

        func postNotification(_ path: String, signedPayload: String) async throws -> HTTP.Reply {
            try await post(path, body: try JSONEncoder().encode(["signedPayload": signedPayload]))
        }
    }

    @Test func aGenuineNotificationIsStoredOnceAndDuplicatesAre200() async throws {
        try await TestDatabase.with { db in
            try await withServer(db) { base in
                let t0 = app.start
                let payload = try app.notification(
                    .subscribed, .initialBuy, signedDate: t0,
                    transaction: app.subscription(original: "9000", period: 0, signedDate: t0))
                let first = try await HTTP.postNotification("\(base)/notifications", signedPayload: payload)
                #expect(first.status == 200)
                #expect(first.json["outcome"] as? String == "applied")
                let second = try await HTTP.postNotification("\(base)/notifications", signedPayload: payload)
                #expect(second.status == 200)
                #expect(second.json["outcome"] as? String == "duplicate")
                #expect(try await db.count("SELECT count(*) FROM notifications") == 1)
                #expect(try await db.count("SELECT count(*) FROM purchases WHERE latest_transaction_id = '9000'") == 1)
                let health = try await HTTP.request(.GET, "\(base)/health")
                #expect(health.status == 200)
                let metrics = try PrometheusText(parsing: String(decoding: try await HTTP.request(.GET, "\(base)/metrics").body, as: UTF8.self))
                let app = ["environment": "Production", "bundle_id": TestApp.bundleId]
                #expect(
                    metrics.value(
                        "reconciler_webhook_notifications_total", app.merging(["type": "SUBSCRIBED/INITIAL_BUY", "outcome": "duplicate"]) { $1 }) == 1
                )
                #expect(metrics.value("reconciler_webhook_notifications_total", ["type": "SUBSCRIBED/INITIAL_BUY", "outcome": "applied"]) == 1)
                // The "last received" signal: when this process stored the newest notification.
                let lastReceived = try #require(metrics.value("reconciler_webhook_last_notification_timestamp_seconds", app))
                #expect(abs(lastReceived - Date().timeIntervalSince1970) < 600)
                #expect(metrics.value("reconciler_webhook_store_failures_total", app) == 0)
            }
        }
    }

    @Test func badInputGets4xxAndWritesNothing() async throws {
        try await TestDatabase.with { db in
            // A second trusted root whose leaves lack Apple's OID: the chain is trusted, the OID is missing.
            let noLeafOID = try SigningCertificateAuthority(options: .init(includeLeafOID: false))
            var configuration = app.verifierConfiguration
            configuration.rootCertificates.append(noLeafOID.root)
            let handler = NotificationHandler(verifier: try SignedDataVerifier(configuration: configuration), database: db.database)
            let t0 = app.start
            let transaction = app.subscription(original: "9100", period: 0, signedDate: t0)
            let stranger = try SigningCertificateAuthority()
            let expired = try SigningCertificateAuthority(
                options: .init(
                    leafNotValidBefore: Date(timeIntervalSinceNow: -400 * 86400), leafNotValidAfter: Date(timeIntervalSinceNow: -300 * 86400)))
            let expiredChain = JWSSigner(key: expired.leafKey, chain: [expired.leaf, expired.intermediate, app.authority.root])
            let x5c = app.authority.signer.x5c.map { "\"\($0)\"" }.joined(separator: ",")
            let hs256 = JWSSigner(key: app.authority.leafKey, rawHeaderJSON: "{\"alg\":\"HS256\",\"x5c\":[\(x5c)]}")
            let none = JWSSigner(key: app.authority.leafKey, rawHeaderJSON: "{\"alg\":\"none\",\"x5c\":[\(x5c)]}")
            let genuine = try app.notification(.subscribed, signedDate: t0, transaction: transaction)
            var tampered = genuine.split(separator: ".").map(String.init)
            tampered[1] = String(try app.notification(.didRenew, signedDate: t0, transaction: transaction).split(separator: ".")[1])
            let anotherKey = JWSSigner(key: .init(), chain: [app.authority.leaf, app.authority.intermediate, app.authority.root])
            let withoutLeafOID = JWSSigner(key: stranger.leafKey, chain: [stranger.leaf, stranger.intermediate, app.authority.root])
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            func signed(
                _ signer: JWSSigner? = nil, bundleId: String = TestApp.bundleId, appAppleId: Int64? = TestApp.appAppleId,
                environment: AppStoreEnvironment? = nil, signedDate: Int64? = nil
            ) throws -> Data {
                try body(
                    try app.notification(
                        .subscribed, signedDate: signedDate ?? t0, transaction: transaction, bundleId: bundleId,
                        appAppleId: appAppleId, environment: environment, signer: signer))
            }
            let cases: [(String, Data, Int, String)] = [
                ("tampered", try body(tampered.joined(separator: ".")), 400, "INVALID_SIGNATURE"),
                ("another key", try signed(anotherKey), 400, "INVALID_SIGNATURE"),
                ("unknown root", try signed(stranger.signer), 400, "UNTRUSTED_ROOT"),
                ("missing leaf OID", try signed(noLeafOID.signer), 400, "MISSING_LEAF_OID"),
                ("foreign CA pasting a trusted root", try signed(withoutLeafOID), 400, "INVALID_CHAIN"),
                ("HS256", try signed(hs256), 400, "UNSUPPORTED_ALGORITHM"),
                ("none", try signed(none), 400, "UNSUPPORTED_ALGORITHM"),
                ("expired foreign leaf", try signed(expiredChain, signedDate: now), 400, "INVALID_CHAIN"),
                // Authentic, but for an app or environment not configured: a configuration gap, not a forgery (Apple retries a 503).
                ("another app", try signed(bundleId: "com.other"), 503, "APP_NOT_CONFIGURED"),
                ("another environment", try signed(environment: .sandbox), 503, "APP_NOT_CONFIGURED"),
                ("another app Apple ID", try signed(appAppleId: 99), 503, "APP_NOT_CONFIGURED"),
                ("not a JWS", try body("hello"), 400, "MALFORMED_JWS"),
                ("not JSON", Data("signedPayload=abc".utf8), 400, "MALFORMED_BODY"),
                ("no signedPayload", Data("{\"payload\":\"x\"}".utf8), 400, "MALFORMED_BODY"),
                // The compact form's edges: what its reader leaves to the JSON decoder is answered as before.
                ("unterminated", Data("{\"signedPayload\":\"abc".utf8), 400, "MALFORMED_BODY"),
                ("empty signedPayload", Data("{\"signedPayload\":\"\"}".utf8), 400, "MALFORMED_BODY"),
                ("trailing text", Data("{\"signedPayload\":\"abc\"}x".utf8), 400, "MALFORMED_BODY"),
                ("another member after", Data("{\"signedPayload\":\"abc\",\"other\":1}".utf8), 400, "MALFORMED_JWS"),
                ("escaped", Data("{\"signedPayload\":\"a\\u0062c\"}".utf8), 400, "MALFORMED_JWS"),
                ("oversized", try body(String(repeating: "a", count: 100 * 1024)), 413, "BODY_TOO_LARGE"),
            ]
            // The server's present: an hour after the notifications of apps it does not serve were signed.
            try await withRouter(db, maximumBodySize: 64 * 1024, handler: handler, now: Timestamp(millisecondsSince1970: t0 + 3_600_000)) { client in
                let fingerprint = try await db.stateFingerprint()
                for (name, data, status, error) in cases {
                    let reply = try await client.post("/notifications", body: data)
                    #expect(reply.status == status, "\(name)")
                    #expect(reply.json["error"] as? String == error, "\(name): \(String(decoding: reply.body, as: UTF8.self))")
                }
                #expect(try await db.stateFingerprint() == fingerprint)
                #expect(try await db.count("SELECT count(*) FROM notifications") == 0)
                // Each rejection counted under its reason; nothing stored, so no "last received".
                let response = try await client.client.execute(uri: "/metrics", method: .get)
                let metrics = try PrometheusText(parsing: String(buffer: response.body))
                for reason in Set(cases.map(\.3)).subtracting(["APP_NOT_CONFIGURED"]) {
                    #expect(
                        metrics.value("reconciler_webhook_rejected_total", ["reason": reason]) == Double(cases.count { $0.3 == reason }), "\(reason)")
                }
                // The app the server serves, in another environment or with another app Apple ID: counted
                // under the app and environment each named (it pages). Another app: counted without them.
                #expect(metrics.value("reconciler_webhook_unconfigured_app_total", ["bundle_id": TestApp.bundleId, "environment": "Sandbox"]) == 1)
                #expect(
                    metrics.value("reconciler_webhook_unconfigured_app_total", ["bundle_id": TestApp.bundleId, "environment": "Production"]) == 1)
                #expect(metrics.samples("reconciler_webhook_unconfigured_app_total").count == 2)
                #expect(metrics.value("reconciler_webhook_foreign_app_total") == 1)
                #expect(metrics.value("reconciler_webhook_replayed_total") == 0)
                #expect(metrics.value("reconciler_webhook_rejected_total", ["reason": "INVALID_PAYLOAD"]) == 0)
                #expect(metrics.samples("reconciler_webhook_notifications_total").isEmpty)
                #expect(metrics.samples("reconciler_webhook_last_notification_timestamp_seconds").isEmpty)
            }
        }
    }

    /// The compact body Apple sends is read without a JSON decoder; whatever that reader returns
    /// is what the decoder reads, and anything else it leaves to the decoder.
    @Test func theCompactBodyIsReadAsTheJSONDecoderReadsIt() throws {
        let jws = try app.notification(
            .subscribed, signedDate: app.start, transaction: app.subscription(original: "9101", period: 0, signedDate: app.start))
        let bodies = [
            "{\"signedPayload\":\"\(jws)\"}", "{\"signedPayload\":\"\(jws)\"}\n", "{ \"signedPayload\": \"\(jws)\" }",
            "{\"signedPayload\":\"a\\/b\"}", "{\"signedPayload\":\"é\"}", "{\"signedPayload\":\"a\tb\"}", "{\"signedPayload\":\"abc\"}}",
            "{\"signedPayload\":\"abc\",\"x\":1}", "{\"signedPayload\":null}", "{\"signedPayload\":\"",
        ]
        for text in bodies {
            let decoded = (try? JSONDecoder().decode(ResponseBodyV2.self, from: Data(text.utf8)))?.signedPayload
            if let compact = WebhookServer.compactSignedPayload(ByteBuffer(string: text)) {
                #expect(compact == decoded, "\(text.prefix(40))")
            }
        }
        // Whatever needs a look, at every place in a word of eight bytes and beyond.
        for offset in 0..<24 {
            for byte: UInt8 in [0x22, 0x5C, 0x00, 0x1F, 0x7F, 0x80, 0xC3, 0xFF] {
                var value = Array(String(repeating: "a", count: 40).utf8)
                value[offset] = byte
                let text = Array(#"{"signedPayload":""#.utf8) + value + Array(#""}"#.utf8)
                let decoded = (try? JSONDecoder().decode(ResponseBodyV2.self, from: Data(text)))?.signedPayload
                let compact = WebhookServer.compactSignedPayload(ByteBuffer(bytes: text))
                #expect(compact == nil || compact == decoded, "byte \(byte) at \(offset)")
                #expect(byte == 0x7F || compact == nil, "byte \(byte) at \(offset)")
            }
        }
        #expect(WebhookServer.compactSignedPayload(ByteBuffer(string: bodies[0])) == jws)
        #expect(WebhookServer.compactSignedPayload(ByteBuffer(string: bodies[2])) == nil)
    }

    /// A leaf whose own validity ended before signedDate fails the time check, not the chain.
    @Test func aLeafExpiredAtSignedDateIsRejectedWithItsReason() async throws {
        try await TestDatabase.with { db in
            let expired = try SigningCertificateAuthority(
                options: .init(
                    leafNotValidBefore: Date(timeIntervalSinceNow: -400 * 86400), leafNotValidAfter: Date(timeIntervalSinceNow: -300 * 86400)))
            let handler = NotificationHandler(
                verifier: try SignedDataVerifier(
                    configuration: .init(
                        rootCertificates: [expired.root], bundleId: TestApp.bundleId, appAppleId: TestApp.appAppleId, environment: .production)),
                database: db.database)
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            let payload = try app.notification(.didRenew, signedDate: now, signer: expired.signer)
            try await withRouter(db, handler: handler) { client in
                let reply = try await client.postNotification("/notifications", signedPayload: payload)
                #expect(reply.status == 400)
                #expect(reply.json["error"] as? String == "CERTIFICATE_NOT_VALID_AT_SIGNED_DATE")
            }
            #expect(try await db.count("SELECT count(*) FROM notifications") == 0)
        }
    }

    /// Genuine notifications of apps the server does not serve, real Apple ones (public in other
    /// projects' repositories, as many are): one signed more than 7 days before the server's
    /// present cannot be Apple's delivery (Apple's last retry comes about 157 hours after the first
    /// attempt), so it gets 400 `NOTIFICATION_TOO_OLD`, counted without labels, whatever the app;
    /// a recent one gets 503 `APP_NOT_CONFIGURED`, and counts in the labelled (paging) counter only
    /// for an app the deployment knows (`knownApps`, or configured in another environment), never
    /// for a TEST notification, which anyone can request for their own app. Nothing is stored.
    @Test func notificationsOfAppsNotServedPageOnlyForKnownAppsAndNeverOnceTooOld() async throws {
        try await TestDatabase.with { db in
            var configuration = app.verifierConfiguration
            configuration.rootCertificates.append(TrustedRoots.appleRootCAG3)
            let handler = NotificationHandler(verifier: try SignedDataVerifier(configuration: configuration), database: db.database)
            let vectors = Repository.root.appendingPathComponent("Tests/UnitTests/AppStoreServer/Fixtures/apple-signed")
            func vector(_ file: String) throws -> (jws: String, signedDate: Int64) {
                let jws = try String(contentsOf: vectors.appendingPathComponent(file), encoding: .utf8)
                return (jws, try #require(UnverifiedPayload.decode(jws, as: ResponseBodyV2DecodedPayload.self)?.signedDate))
            }
            let known = "com.loki-project.loki-messenger"
            let foreign = try vector("09-notification-production.jws")  // CONSUMPTION_REQUEST of com.jrjj.keysns, production
            let knownApps = try vector("02-notification-sandbox.jws")  // SUBSCRIBED of com.loki-project.loki-messenger, sandbox
            let test = try vector("01-notification-sandbox.jws")  // TEST of the same app
            let clock = ServerClock()
            let server = WebhookServer(
                configuration: .init(host: "127.0.0.1", port: 0, now: { clock.now }),
                router: try NotificationRouter(handlers: [handler], knownApps: [known]),
                metrics: WebhookMetrics(registry: MetricsRegistry(bundleId: nil, environment: nil)), logger: TestDatabase.logger)
            let hour: Int64 = 3_600_000
            let cases: [(String, (jws: String, signedDate: Int64), Int64, Int, String)] = [
                ("another app, at Apple's last retry", foreign, foreign.signedDate + 157 * hour, 503, "APP_NOT_CONFIGURED"),
                ("another app, 7 days on", foreign, foreign.signedDate + 7 * 24 * hour + 1, 400, "NOTIFICATION_TOO_OLD"),
                ("another app, posted again", foreign, foreign.signedDate + 400 * 24 * hour, 400, "NOTIFICATION_TOO_OLD"),
                ("a known app", knownApps, knownApps.signedDate + hour, 503, "APP_NOT_CONFIGURED"),
                ("a known app, 7 days on", knownApps, knownApps.signedDate + 7 * 24 * hour + 1, 400, "NOTIFICATION_TOO_OLD"),
                ("a TEST notification", test, test.signedDate + hour, 503, "APP_NOT_CONFIGURED"),
                ("a TEST notification again", test, test.signedDate + 2 * hour, 503, "APP_NOT_CONFIGURED"),
                ("a TEST notification, 7 days on", test, test.signedDate + 7 * 24 * hour + 1, 400, "NOTIFICATION_TOO_OLD"),
            ]
            try await withServer(server) { base in
                let fingerprint = try await db.stateFingerprint()
                for (name, notification, now, status, error) in cases {
                    clock.set(Timestamp(millisecondsSince1970: now))
                    let reply = try await HTTP.postNotification("\(base)/notifications", signedPayload: notification.jws)
                    #expect(reply.status == status, "\(name)")
                    #expect(reply.json["error"] as? String == error, "\(name): \(String(decoding: reply.body, as: UTF8.self))")
                }
                #expect(try await db.stateFingerprint() == fingerprint)
                #expect(try await db.count("SELECT count(*) FROM notifications") == 0)
                let metrics = try PrometheusText(parsing: String(decoding: try await HTTP.request(.GET, "\(base)/metrics").body, as: UTF8.self))
                // Only the known app's recent notification pages.
                #expect(metrics.samples("reconciler_webhook_unconfigured_app_total").map(\.labels["bundle_id"]) == [known])
                #expect(metrics.value("reconciler_webhook_unconfigured_app_total", ["bundle_id": known, "environment": "Sandbox"]) == 1)
                #expect(metrics.value("reconciler_webhook_foreign_app_total") == 3)
                #expect(metrics.value("reconciler_webhook_replayed_total") == 4)
                #expect(metrics.value("reconciler_webhook_rejected_total", ["reason": "NOTIFICATION_TOO_OLD"]) == nil)
            }
        }
    }

    /// One server for an app in both environments (the sandbox's notifications come to the
    /// production URL): each environment's counters exist from the start, the store failures at 0,
    /// and a notification is counted under the environment it names.
    @Test func everyAppsCountersStartWithTheServer() async throws {
        try await TestDatabase.with { db in
            let production = try app.handler(db)
            let sandbox = NotificationHandler(
                verifier: try production.verifier.verifier(for: AppTarget(bundleId: TestApp.bundleId, environment: .sandbox)), database: db.database)
            // As `serve` makes it for several apps: the process's registry names no app.
            let server = WebhookServer(
                configuration: .init(), router: try NotificationRouter(handlers: [production, sandbox]),
                metrics: WebhookMetrics(registry: MetricsRegistry(bundleId: nil, environment: nil)), logger: TestDatabase.logger)
            try await server.makeApplication().test(.router) { client in
                func metrics() async throws -> PrometheusText {
                    try PrometheusText(parsing: String(buffer: try await client.execute(uri: "/metrics", method: .get).body))
                }
                let before = try await metrics()
                for environment in ["Production", "Sandbox"] {
                    #expect(
                        before.value("reconciler_webhook_store_failures_total", ["bundle_id": TestApp.bundleId, "environment": environment]) == 0,
                        "\(environment)")
                }
                var transaction = app.subscription(original: "9300", period: 0, signedDate: app.start)
                transaction.environment = .sandbox
                let payload = try app.notification(.subscribed, .initialBuy, signedDate: app.start, transaction: transaction, environment: .sandbox)
                let reply = try await RouterClient(client: client).postNotification("/notifications", signedPayload: payload)
                #expect(reply.status == 200, "\(String(decoding: reply.body, as: UTF8.self))")
                let after = try await metrics()
                let sandboxStored = ["bundle_id": TestApp.bundleId, "environment": "Sandbox", "type": "SUBSCRIBED/INITIAL_BUY", "outcome": "applied"]
                #expect(after.value("reconciler_webhook_notifications_total", sandboxStored) == 1)
                #expect(after.samples("reconciler_webhook_notifications_total").count == 1)
            }
            #expect(try await db.count("SELECT count(*) FROM purchases WHERE environment = 'Sandbox' AND original_transaction_id = '9300'") == 1)
        }
    }

    /// A notification the database refuses (a trigger here) is answered by the one mapping of
    /// failures to answers: 503 `STORE_UNAVAILABLE` (Apple delivers it again), with none of the
    /// database's words in the body, and counted as a store failure.
    @Test func aNotificationTheDatabaseRefusesIsA503ThatSaysNothingOfTheDatabase() async throws {
        try await TestDatabase.with { db in
            try await db.execute(
                """
                CREATE FUNCTION refuse_all() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN RAISE EXCEPTION 'refused by the test'; END $$
                """)
            try await db.execute("CREATE TRIGGER refuse_all BEFORE INSERT ON notifications FOR EACH ROW EXECUTE FUNCTION refuse_all()")
            try await withRouter(db) { client in
                let payload = try app.notification(
                    .subscribed, .initialBuy, signedDate: app.start, transaction: app.subscription(original: "9400", period: 0, signedDate: app.start)
                )
                let reply = try await client.postNotification("/notifications", signedPayload: payload)
                #expect(reply.status == 503)
                #expect(reply.json["error"] as? String == "STORE_UNAVAILABLE")
                #expect(reply.json["detail"] as? String == "the notification was not stored; retry later")
                #expect(!String(decoding: reply.body, as: UTF8.self).contains("refused by the test"))
            }
            #expect(try await db.count("SELECT count(*) FROM notifications") == 0)
        }
    }

    func body(_ signedPayload: String) throws -> Data {
        try JSONEncoder().encode(["signedPayload": signedPayload])
    }
}

/// The present of a server under test, moved by the test.
final class ServerClock: Sendable {
    private let value = Mutex(Timestamp.now)

    var now: Timestamp { value.withLock { $0 } }

    func set(_ now: Timestamp) { value.withLock { $0 = now } }
}
