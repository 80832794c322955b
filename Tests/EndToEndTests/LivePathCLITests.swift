import AppStoreServer
import Foundation
import MockAppStore
import NIOHTTP1
import PostgresNIO
import Reconciler
import ReconcilerDomain
import ReconcilerShared
import TestSupport
import Testing

/// The live path through the `reconciler` binary, configured only by environment variables as an
/// operator would: migrate, serve (with APP_STORE_ROOT_CERTIFICATES), inspect and export.
@Suite struct LivePathCLITests {
    let app: TestApp
    init() throws { app = try TestApp() }

    func environment(_ db: TestDatabase, rootsFile: String) -> [String: String] {
        [
            "DATABASE_URL": db.url, "APP_STORE_BUNDLE_ID": TestApp.bundleId, "APP_STORE_APP_APPLE_ID": String(TestApp.appAppleId),
            "APP_STORE_ENVIRONMENT": "production", "APP_STORE_ROOT_CERTIFICATES": rootsFile, "LOG_LEVEL": "info",
        ]
    }

    func writeRoot(in directory: TemporaryDirectory) throws -> String {
        let path = directory.file("root.pem")
        try app.authority.rootPEM.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// `serve` connects to its database before anything else (and gives up after --database-timeout,
    /// UnreachableDatabaseTests); SIGTERM while it waits for a database that is away ends it at once, and cleanly.
    @Test func sigtermWhileServeWaitsForTheDatabaseEndsItCleanly() async throws {
        let serve = try RunningProcess(
            "reconciler", ["serve", "--port", "\(freePort())", "--host", "127.0.0.1", "--database-timeout", "5m", "--verbose"],
            environment: [
                "DATABASE_URL": "postgres://reconciler@127.0.0.1:\(freePort())/absent", "APP_STORE_BUNDLE_ID": TestApp.bundleId,
                "APP_STORE_ENVIRONMENT": "sandbox", "LOG_LEVEL": "info",
            ])
        try await serve.waitForOutput(containing: "connecting to the database failed")
        serve.signal(SIGTERM)
        let served = try await serve.wait(timeout: .seconds(60))
        #expect(served.status == 0, "\(served.stderr)")
        #expect(served.stderr.contains("stopped before connecting to the database"), "\(served.stderr)")
    }

    @Test func migrateServeExportAndInspect() async throws {
        try await TemporaryDirectory.with { directory in
            try await TestDatabase.with(migrate: false) { db in
                let env = environment(db, rootsFile: try writeRoot(in: directory))
                let migrate = try await runProcess("reconciler", ["migrate"], environment: env)
                #expect(migrate.status == 0, "\(migrate.stderr)")
                #expect(migrate.stdout.contains("applied 0001_live_path.sql"))
                let again = try await runProcess("reconciler", ["migrate"], environment: env)
                #expect(again.status == 0)
                #expect(again.stdout.contains("schema is current"))

                let port = freePort()
                let serve = try RunningProcess("reconciler", ["serve", "--port", "\(port)", "--host", "127.0.0.1"], environment: env)
                try await serve.waitForOutput(containing: "listening")
                let t0 = app.start
                let transaction = app.subscription(original: "8000", period: 0, signedDate: t0)
                let payload = try app.notification(
                    .subscribed, .initialBuy, signedDate: t0, transaction: transaction,
                    renewal: app.renewal(original: "8000", autoRenew: .on, signedDate: t0))
                let reply = try await HTTP.postNotification("http://127.0.0.1:\(port)/notifications", signedPayload: payload)
                #expect(reply.status == 200)
                let forged = try await HTTP.postNotification(
                    "http://127.0.0.1:\(port)/notifications",
                    signedPayload: try app.notification(
                        .didRenew, signedDate: t0, transaction: transaction, signer: try SigningCertificateAuthority().signer))
                #expect(forged.status == 400)
                #expect((try await HTTP.request(.GET, "http://127.0.0.1:\(port)/health")).status == 200)
                serve.signal(SIGTERM)
                let served = try await serve.wait(timeout: .seconds(30))
                #expect(served.status == 0, "\(served.stderr)")
                // Logs name the notification but never carry the payload.
                #expect(served.stderr.contains("SUBSCRIBED/INITIAL_BUY"))
                #expect(!served.stderr.contains(String(payload.prefix(40))))

                let export = try await runProcess("reconciler", ["export"], environment: env)
                #expect(export.status == 0, "\(export.stderr)")
                let lines = export.stdout.split(separator: "\n")
                #expect(lines.count == 1)
                let state = try JSONDecoder().decode(PurchaseState.self, from: Data(lines[0].utf8))
                #expect(
                    state
                        == PurchaseState(
                            originalTransactionId: "8000", latestTransactionId: "8000", productId: "com.example.monthly", bundleId: TestApp.bundleId,
                            environment: .production,
                            purchaseDate: transaction.purchaseDate, expiresDate: transaction.expiresDate, revocationDate: nil,
                            autoRenewStatus: 1, lastSignedDate: t0, entitled: true))  // it expires in 20 days
                #expect(lines[0].contains("\"revocationDate\":null"))

                let genuine = try await runProcess("reconciler", ["inspect", payload], environment: env)
                #expect(genuine.status == 0, "\(genuine.stderr)")
                #expect(genuine.stdout.contains("\"kind\" : \"notification\""))
                #expect(genuine.stdout.contains("decodedTransactionInfo"))
                let fromStdin = try await runProcess(
                    "reconciler", ["inspect", "-"], environment: env,
                    stdin: Data("{\"signedPayload\":\"\(payload)\"}".utf8))
                #expect(fromStdin.status == 0)
                var tampered = payload.split(separator: ".").map(String.init)
                tampered[1] = String(try app.notification(.refund, signedDate: t0, transaction: transaction).split(separator: ".")[1])
                let rejected = try await runProcess("reconciler", ["inspect", tampered.joined(separator: ".")], environment: env)
                #expect(rejected.status == 3)
                #expect(rejected.stderr.contains("INVALID_SIGNATURE"))
                let wrongBundle = try await runProcess(
                    "reconciler", ["inspect", payload], environment: env.merging(["APP_STORE_BUNDLE_ID": "com.other"]) { $1 })
                #expect(wrongBundle.status == 3)
                #expect(wrongBundle.stderr.contains("INVALID_BUNDLE_ID"))
            }
        }
    }

    /// `serve` with a configuration file pages (the labelled counter) only for a genuine
    /// notification of an app the deployment knows, configured in another environment or listed in
    /// `knownApps`; another app's and a TEST notification only warn (the unlabelled counter); one
    /// signed more than 7 days before its clock, a real Apple notification of someone else's app
    /// among them, is refused with 400 `NOTIFICATION_TOO_OLD`. Nothing is stored.
    @Test func serveWithAConfigurationFilePagesOnlyForTheAppsItKnows() async throws {
        try await TemporaryDirectory.with { directory in
            try await TestDatabase.with { db in
                let appleRoot = Repository.root.appendingPathComponent(
                    "Tests/UnitTests/AppStoreServer/Fixtures/apple-signed/real-chain/AppleRootCA-G3.pem")
                let file = directory.file("reconciler.yaml")
                try """
                key: {id: K, issuer: I, privateKeyPath: \(directory.file("AuthKey.p8"))}
                rootCertificates: [\(try writeRoot(in: directory)), \(appleRoot.path)]
                knownApps: [com.example.known]
                apps:
                  - {bundleId: \(TestApp.bundleId), appAppleId: \(TestApp.appAppleId), environments: [production]}
                """.write(toFile: file, atomically: true, encoding: .utf8)
                let port = freePort()
                let serve = try RunningProcess(
                    "reconciler", ["serve", "--port", "\(port)", "--host", "127.0.0.1", "--config", file],
                    environment: ["DATABASE_URL": db.url, "LOG_LEVEL": "info"])
                try await serve.waitForOutput(containing: "listening")
                let now = Int64(Date().timeIntervalSince1970 * 1000), hour: Int64 = 3_600_000
                func signed(
                    _ type: NotificationTypeV2, bundleId: String, environment: AppStoreEnvironment = .production, signedDate: Int64
                ) throws
                    -> String
                {
                    try app.notification(type, signedDate: signedDate, bundleId: bundleId, appAppleId: 42, environment: environment)
                }
                let apple = try String(
                    contentsOf: Repository.root.appendingPathComponent(
                        "Tests/UnitTests/AppStoreServer/Fixtures/apple-signed/09-notification-production.jws"),
                    encoding: .utf8)
                let cases: [(String, String, Int, String)] = [
                    ("in knownApps", try signed(.didRenew, bundleId: "com.example.known", signedDate: now - hour), 503, "APP_NOT_CONFIGURED"),
                    (
                        "configured in another environment",
                        try signed(.didRenew, bundleId: TestApp.bundleId, environment: .sandbox, signedDate: now - hour),
                        503, "APP_NOT_CONFIGURED"
                    ),
                    ("another app", try signed(.didRenew, bundleId: "com.example.stranger", signedDate: now - hour), 503, "APP_NOT_CONFIGURED"),
                    ("a TEST notification", try signed(.test, bundleId: "com.example.known", signedDate: now - hour), 503, "APP_NOT_CONFIGURED"),
                    (
                        "in knownApps, 8 days ago", try signed(.didRenew, bundleId: "com.example.known", signedDate: now - 192 * hour), 400,
                        "NOTIFICATION_TOO_OLD"
                    ),
                    ("Apple's, of another app, in 2023", apple, 400, "NOTIFICATION_TOO_OLD"),
                ]
                for (name, payload, status, error) in cases {
                    let reply = try await HTTP.postNotification("http://127.0.0.1:\(port)/notifications", signedPayload: payload)
                    #expect(reply.status == status, "\(name): \(String(decoding: reply.body, as: UTF8.self))")
                    #expect(reply.json["error"] as? String == error, "\(name)")
                }
                let metrics = try PrometheusText(
                    parsing: String(decoding: try await HTTP.request(.GET, "http://127.0.0.1:\(port)/metrics").body, as: UTF8.self))
                let paging = metrics.samples("reconciler_webhook_unconfigured_app_total").map {
                    "\($0.labels["bundle_id"] ?? "?") \($0.labels["environment"] ?? "?") \($0.value)"
                }
                #expect(Set(paging) == ["\(TestApp.bundleId) Sandbox 1.0", "com.example.known Production 1.0"])
                #expect(metrics.value("reconciler_webhook_foreign_app_total") == 2)
                #expect(metrics.value("reconciler_webhook_replayed_total") == 2)
                // Ended without a signal: serve's exit 0 on SIGTERM is migrateServeExportAndInspect's.
                serve.kill()
                #expect(try await db.count("SELECT count(*) FROM notifications") == 0)
            }
        }
    }

    /// An authentic notification the binary cannot decode: serve answers 200 and quarantines it,
    /// `rejections` lists it with its UUID (one whose app cannot be read under its own header), and
    /// `rejections --retry` with this release leaves it quarantined and exits 4.
    @Test func serveQuarantinesWhatItCannotDecodeAndRejectionsRetriesIt() async throws {
        try await TemporaryDirectory.with { directory in
            try await TestDatabase.with { db in
                let env = environment(db, rootsFile: try writeRoot(in: directory))
                let port = freePort()
                let serve = try RunningProcess("reconciler", ["serve", "--port", "\(port)", "--host", "127.0.0.1"], environment: env)
                try await serve.waitForOutput(containing: "listening")
                let (named, unnamed) = (UUID().uuidString.lowercased(), UUID().uuidString.lowercased())
                for (uuid, naming) in [(named, true), (unnamed, false)] {
                    let payload = try app.undecodableNotification(uuid: uuid, original: "8811", naming: naming)
                    let reply = try await HTTP.postNotification("http://127.0.0.1:\(port)/notifications", signedPayload: payload)
                    #expect(reply.status == 200, "\(String(decoding: reply.body, as: UTF8.self))")
                    #expect(reply.json["outcome"] as? String == "quarantined")
                }
                // Logged as each answer is sent; serve's exit 0 on SIGTERM is migrateServeExportAndInspect's.
                try await serve.waitForOutput(containing: "quarantined (200)")
                serve.kill()

                let listed = try await runProcess("reconciler", ["rejections"], environment: env)
                #expect(listed.status == 0, "\(listed.stderr)")
                #expect(listed.stdout.contains(named) && listed.stdout.contains("webhook"), "\(listed.stdout)")
                let unreadable = try #require(listed.stdout.range(of: "== (app unreadable)"), "\(listed.stdout)")
                #expect(listed.stdout[unreadable.upperBound...].contains(unnamed))
                #expect(!listed.stdout[..<unreadable.lowerBound].contains(unnamed))

                let retried = try await runProcess("reconciler", ["rejections", "--retry", named], environment: env)
                #expect(retried.status == 4, "\(retried.stdout)\(retried.stderr)")
                #expect(retried.stderr.contains("still does not decode (INVALID_PAYLOAD"), "\(retried.stderr)")
                #expect(try await db.count("SELECT count(*) FROM quarantined_payloads WHERE source = 'webhook'") == 2)
                #expect(try await db.count("SELECT count(*) FROM notifications") == 0)
                let unknown = try await runProcess("reconciler", ["rejections", "--retry", "no-such-notification"], environment: env)
                #expect(unknown.status == 1, "\(unknown.stderr)")
            }
        }
    }

    @Test func configurationErrorsExitWith1AndSayWhatToFix() async throws {
        let noDatabase = try await runProcess("reconciler", ["export"], environment: ["DATABASE_URL": ""])
        #expect(noDatabase.status == 1)
        #expect(noDatabase.stderr.contains("DATABASE_URL"))
        let badFlag = try await runProcess("reconciler", ["export", "--no-such-flag"])
        #expect(badFlag.status == 1)
        let production = try await runProcess(
            "reconciler", ["serve"],
            environment: [
                "DATABASE_URL": "postgres://x@127.0.0.1:1/x", "APP_STORE_BUNDLE_ID": "com.example", "APP_STORE_ENVIRONMENT": "production",
                "APP_STORE_APP_APPLE_ID": "",
            ])
        #expect(production.status == 1)
        #expect(production.stderr.contains("APP_STORE_APP_APPLE_ID"))
        let badRoots = try await runProcess("reconciler", ["inspect", "x.y.z"], environment: ["APP_STORE_ROOT_CERTIFICATES": "/nonexistent.pem"])
        #expect(badRoots.status == 1)
        #expect(badRoots.stderr.contains("/nonexistent.pem"))
    }
}
