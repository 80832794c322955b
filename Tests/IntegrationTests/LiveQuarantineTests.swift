import AppStoreServer
import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
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

/// An authentic notification the tool cannot decode (a field of a shape Apple added after this
/// release) is never lost: the webhook quarantines its exact bytes and answers 200, and
/// `rejections --retry` applies it once the handler knows the shape. Forgeries stay 400.
@Suite struct LiveQuarantineTests {
    let app: TestApp
    init() throws { app = try TestApp() }

    func undecodableNotification(uuid: String, original: String, signer: JWSSigner? = nil) throws -> String {
        try app.undecodableNotification(uuid: uuid, original: original, signer: signer)
    }

    func post(_ client: some TestClientProtocol, _ signedPayload: String) async throws -> (status: Int, json: [String: Any]) {
        let response = try await client.execute(
            uri: "/notifications", method: .post, headers: [.contentType: "application/json"],
            body: ByteBuffer(data: try JSONEncoder().encode(["signedPayload": signedPayload])))
        return (Int(response.status.code), (try? JSONSerialization.jsonObject(with: Data(buffer: response.body))) as? [String: Any] ?? [:])
    }

    @Test func anAuthenticNotificationThatDoesNotDecodeIsQuarantinedAndAnswered200() async throws {
        try await TestDatabase.with { db in
            let uuid = UUID().uuidString.lowercased()
            let jws = try undecodableNotification(uuid: uuid, original: "8801")
            let server = WebhookServer(configuration: .init(), handler: try app.handler(db), logger: TestDatabase.logger)
            try await server.makeApplication().test(.router) { client in
                let reply = try await post(client, jws)
                #expect(reply.status == 200, "\(reply.json)")
                #expect(reply.json["outcome"] as? String == "quarantined")
                #expect(reply.json["notificationUUID"] as? String == uuid)
            }
            // Its exact bytes, under the app and environment it names, and nothing applied.
            #expect(
                try await db.strings(
                    "SELECT source || ' ' || bundle_id || ' ' || environment || ' ' || notification_uuid || ' ' || reason FROM quarantined_payloads")
                    == ["webhook \(TestApp.bundleId) \(app.environment.rawValue) \(uuid) INVALID_PAYLOAD"])
            #expect(try await db.strings("SELECT signed_payload FROM quarantined_payloads") == [jws])
            #expect(try await db.count("SELECT count(*) FROM notifications") == 0)
            #expect(try await db.count("SELECT count(*) FROM purchases") == 0)
        }
    }

    /// Both reasons a verified notification can fail for are quarantined: a payload without its
    /// signedDate, and a nested signed transaction that does not decode; the same shapes signed
    /// with another key stay 400.
    @Test func aMissingSignedDateAndAnUndecodableTransactionAreQuarantinedToo() async throws {
        try await TestDatabase.with { db in
            let anotherKey = JWSSigner(key: .init(), chain: [app.authority.leaf, app.authority.intermediate, app.authority.root])
            func signed(_ signer: JWSSigner, uuid: String, dropSignedDate: Bool, transactionQuantity: Any) throws -> String {
                var transaction = try #require(
                    try JSONSerialization.jsonObject(
                        with: try JSONEncoder().encode(app.subscription(original: "8804", period: 0, signedDate: app.start))) as? [String: Any])
                transaction["quantity"] = transactionQuantity
                let nested = try signer.sign(payloadJSON: try JSONSerialization.data(withJSONObject: transaction))
                let payload = ResponseBodyV2DecodedPayload(
                    notificationType: .subscribed, subtype: .initialBuy, notificationUUID: uuid, signedDate: app.start + 1_000,
                    data: NotificationData(
                        appAppleId: TestApp.appAppleId, bundleId: TestApp.bundleId, environment: app.environment, signedTransactionInfo: nested))
                var object = try #require(try JSONSerialization.jsonObject(with: try JSONEncoder().encode(payload)) as? [String: Any])
                if dropSignedDate { object["signedDate"] = nil }
                return try signer.sign(payloadJSON: try JSONSerialization.data(withJSONObject: object))
            }
            let (undated, nested) = (UUID().uuidString.lowercased(), UUID().uuidString.lowercased())
            let server = WebhookServer(configuration: .init(), handler: try app.handler(db), logger: TestDatabase.logger)
            let cases: [(String, String, Int, String?)] = [
                ("no signedDate", try signed(app.authority.signer, uuid: undated, dropSignedDate: true, transactionQuantity: 1), 200, nil),
                (
                    "a transaction of another shape",
                    try signed(app.authority.signer, uuid: nested, dropSignedDate: false, transactionQuantity: "one"), 200, nil
                ),
                (
                    "no signedDate, forged", try signed(anotherKey, uuid: "forged-1", dropSignedDate: true, transactionQuantity: 1), 400,
                    "INVALID_SIGNATURE"
                ),
                (
                    "another shape, forged", try signed(anotherKey, uuid: "forged-2", dropSignedDate: false, transactionQuantity: "one"), 400,
                    "INVALID_SIGNATURE"
                ),
            ]
            try await server.makeApplication().test(.router) { client in
                for (name, payload, status, error) in cases {
                    let reply = try await post(client, payload)
                    #expect(reply.status == status, "\(name): \(reply.json)")
                    #expect(reply.json["error"] as? String == error, "\(name)")
                }
            }
            #expect(
                Set(try await db.strings("SELECT notification_uuid || ' ' || reason FROM quarantined_payloads"))
                    == ["\(undated) MISSING_SIGNED_DATE", "\(nested) INVALID_PAYLOAD"])
            #expect(try await db.count("SELECT count(*) FROM notifications") == 0)
        }
    }

    /// The same notification, quarantined; posted again it is counted again but stored once, and a
    /// forgery of it (another key, an untrusted root) is refused with 400 and stores nothing.
    @Test func forgeriesStay400AndARepeatIsStoredOnce() async throws {
        try await TestDatabase.with { db in
            let uuid = UUID().uuidString.lowercased()
            let jws = try undecodableNotification(uuid: uuid, original: "8802")
            let stranger = try SigningCertificateAuthority()
            let anotherKey = JWSSigner(key: .init(), chain: [app.authority.leaf, app.authority.intermediate, app.authority.root])
            let metrics = MetricsRegistry(bundleId: nil, environment: nil)
            let server = WebhookServer(
                configuration: .init(), router: try NotificationRouter(handlers: [try app.handler(db)]), metrics: WebhookMetrics(registry: metrics),
                logger: TestDatabase.logger)
            try await server.makeApplication().test(.router) { client in
                #expect(try await post(client, jws).status == 200)
                #expect(try await post(client, jws).status == 200)
                let forged = try await post(client, try undecodableNotification(uuid: uuid, original: "8802", signer: anotherKey))
                #expect(forged.status == 400)
                #expect(forged.json["error"] as? String == "INVALID_SIGNATURE")
                let untrusted = try await post(client, try undecodableNotification(uuid: uuid, original: "8802", signer: stranger.signer))
                #expect(untrusted.json["error"] as? String == "UNTRUSTED_ROOT")
            }
            #expect(try await db.strings("SELECT times_seen::text FROM quarantined_payloads") == ["2"])
            let text = try PrometheusText(parsing: metrics.exposition())
            #expect(
                text.value(
                    "reconciler_webhook_quarantined_total",
                    ["reason": "INVALID_PAYLOAD", "bundle_id": TestApp.bundleId, "environment": app.environment.rawValue]) == 2)
            #expect(text.value("reconciler_webhook_rejected_total", ["reason": "INVALID_PAYLOAD"]) == 0)
        }
    }

    /// `rejections --retry`'s core: untaught, the notification stays; once the handler is taught the
    /// new shape (a payload upgrade that reads the word as Apple's number) it is applied as a live
    /// notification, reaches the purchase and the feed, and leaves the quarantine.
    @Test func aRetryAppliesTheNotificationOnceTheHandlerKnowsItsShape() async throws {
        try await TestDatabase.with { db in
            let uuid = UUID().uuidString.lowercased()
            let jws = try undecodableNotification(uuid: uuid, original: "8803")
            let server = WebhookServer(configuration: .init(), handler: try app.handler(db), logger: TestDatabase.logger)
            try await server.makeApplication().test(.router) { client in
                let reply = try await post(client, jws)
                #expect(reply.status == 200)
            }
            let ledger = RunLedger(database: db.database)
            let byUUID = try await ledger.quarantinedNotifications(matching: uuid)
            let quarantined = try #require(byUUID.first)
            #expect(byUUID.count == 1)
            #expect(try await ledger.quarantinedNotifications(matching: String(quarantined.payloadSHA256.prefix(10))) == byUUID)
            #expect(try await ledger.quarantinedNotifications(matching: String(quarantined.payloadSHA256.prefix(7))).isEmpty)

            // Today's release: still undecodable, and it stays.
            let untaught = try NotificationRouter(handlers: [try app.handler(db)])
            guard case .stillUndecodable(let error) = try await untaught.retry(quarantined) else {
                Issue.record("an untaught handler applied it")
                return
            }
            #expect(error.reason == .invalidPayload)
            #expect(try await db.count("SELECT count(*) FROM quarantined_payloads") == 1)
            #expect(try await db.count("SELECT count(*) FROM notifications") == 0)

            // The next release knows the shape.
            var configuration = app.verifierConfiguration
            configuration.payloadUpgrade = SignedDataVerifier.PayloadUpgrade { json in
                guard var object = try JSONSerialization.jsonObject(with: Data(json)) as? [String: Any],
                    var data = object["data"] as? [String: Any], data["status"] as? String == "ACTIVE"
                else { return json }
                data["status"] = 1
                object["data"] = data
                return [UInt8](try JSONSerialization.data(withJSONObject: object))
            }
            let taught = try NotificationRouter(
                handlers: [
                    NotificationHandler(scope: app.scope(), verifier: try SignedDataVerifier(configuration: configuration), database: db.database)
                ])
            guard case .applied(let result, let target) = try await taught.retry(quarantined) else {
                Issue.record("the taught handler did not apply it")
                return
            }
            #expect(result.notificationUUID == uuid)
            #expect(result.outcome == .applied)
            #expect(target == app.verifierConfiguration.target)
            #expect(try await db.count("SELECT count(*) FROM quarantined_payloads") == 0)
            #expect(try await db.strings("SELECT notification_uuid FROM notifications") == [uuid])
            #expect(try await db.strings("SELECT original_transaction_id FROM purchases") == ["8803"])
            #expect(try await db.count("SELECT count(*) FROM purchase_changes WHERE source = 'webhook'") >= 1)
            // Retried again: nothing left to retry.
            #expect(try await ledger.quarantinedNotifications(matching: uuid).isEmpty)
        }
    }
}
