import AppStoreServer
import Crypto
import Foundation
import NIOHTTP1
import PostgresNIO
import TestSupport
import Testing

/// Whether `python3` with `openapi-spec-validator` is here (CI installs it: .ci/run).
enum OpenAPIValidator {
    static let script = "import json, sys; from openapi_spec_validator import validate; validate(json.load(sys.stdin)); print('valid')"
    static let isAvailable: Bool = {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", "import openapi_spec_validator"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return false }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }()
    /// CI must run the check, never skip it.
    static let required = ProcessInfo.processInfo.environment["CI"] == "true"
}

extension LivePathCLITests {
    static let appAPIToken = "e2e-app-api-token-4b1d9c"

    /// Runs `serve` with `appApi` in its configuration file for `body` (the webhook's port, the app
    /// API's), then stops it with SIGTERM and returns how it ended.
    /// With `keyReadable`, its key file is there and Apple is an address that refuses connections.
    func withAppAPIServe(
        _ db: TestDatabase, in directory: TemporaryDirectory, keyReadable: Bool = false, _ body: (_ port: Int, _ apiPort: Int) async throws -> Void
    ) async throws -> ProcessResult {
        try "# the app's backend\n\(Self.appAPIToken)\n".write(toFile: directory.file("tokens"), atomically: true, encoding: .utf8)
        if keyReadable {
            try P256.Signing.PrivateKey().pemRepresentation.write(toFile: directory.file("AuthKey.p8"), atomically: true, encoding: .utf8)
        }
        let (port, apiPort) = (freePort(), freePort())
        let file = directory.file("reconciler.yaml")
        try """
        key: {id: K, issuer: I, privateKeyPath: \(directory.file("AuthKey.p8"))}
        rootCertificates: [\(try writeRoot(in: directory))]
        appApi: {tokenFile: \(directory.file("tokens")), port: \(apiPort)}
        apps:
          - {bundleId: \(TestApp.bundleId), appAppleId: \(TestApp.appAppleId), environments: [production]}
        """.write(toFile: file, atomically: true, encoding: .utf8)
        let serve = try RunningProcess(
            "reconciler", ["serve", "--port", "\(port)", "--host", "127.0.0.1", "--config", file],
            environment: ["DATABASE_URL": db.url, "LOG_LEVEL": "info"].merging(keyReadable ? ["APP_STORE_API_BASE_URL": "http://127.0.0.1:9"] : [:]) {
                $1
            })
        try await serve.waitForOutput(containing: "app API listening")
        // The webhook's "listening" line is the one naming its forwarding targets.
        try await serve.waitForOutput(containing: "forwardTo=")
        try await body(port, apiPort)
        serve.signal(SIGTERM)
        return try await serve.wait(timeout: .seconds(30))
    }

    /// `serve` with `appApi` in its configuration file answers the app API on a port of its own:
    /// 401 without a listed token (no data), 200 with the purchase the webhook stored; the token
    /// reaches neither its log nor its metrics; SIGTERM stops both servers cleanly.
    @Test func serveAnswersTheAppAPIOnItsOwnPort() async throws {
        try await TemporaryDirectory.with { directory in
            try await TestDatabase.with { db in
                var metrics = ""
                let served = try await withAppAPIServe(db, in: directory) { port, apiPort in
                    let t0 = app.start
                    let payload = try app.notification(
                        .subscribed, .initialBuy, signedDate: t0, transaction: app.subscription(original: "8400", period: 0, signedDate: t0))
                    #expect(try await HTTP.postNotification("http://127.0.0.1:\(port)/notifications", signedPayload: payload).status == 200)

                    let lookup =
                        "http://127.0.0.1:\(apiPort)/v1/purchases?bundleId=\(TestApp.bundleId)&environment=production&originalTransactionId=8400"
                    let refused = try await HTTP.request(.GET, lookup, headers: [("Authorization", "Bearer wrong")])
                    #expect(refused.status == 401)
                    #expect(refused.json["error"] as? String == "UNAUTHORIZED")
                    #expect(!String(decoding: refused.body, as: UTF8.self).contains("8400"))
                    let found = try await HTTP.request(.GET, lookup, headers: [("Authorization", "Bearer \(Self.appAPIToken)")])
                    #expect(found.status == 200, "\(String(decoding: found.body, as: UTF8.self))")
                    let purchases = found.json["purchases"] as? [[String: Any]] ?? []
                    #expect(purchases.map { $0["originalTransactionId"] as? String } == ["8400"])
                    // Its key file is not on this host: serve started anyway, and a refresh answers the stored state, not fresh.
                    let refreshed = try await HTTP.request(
                        .GET, lookup + "&refresh=always", headers: [("Authorization", "Bearer \(Self.appAPIToken)")])
                    #expect(refreshed.status == 200, "\(String(decoding: refreshed.body, as: UTF8.self))")
                    #expect((refreshed.json["purchases"] as? [[String: Any]])?.first?["fresh"] as? Bool == false)
                    // Not on the webhook's port: it is not Apple's URL.
                    #expect(try await HTTP.request(.GET, "http://127.0.0.1:\(port)/v1/purchases").status == 404)
                    metrics = String(decoding: try await HTTP.request(.GET, "http://127.0.0.1:\(port)/metrics").body, as: UTF8.self)
                    #expect(try PrometheusText(parsing: metrics).value("reconciler_app_api_unauthorized_total") == 1)
                }
                #expect(served.status == 0, "\(served.stderr)")
                #expect((served.stdout + served.stderr).contains("the app API cannot call Apple for this app"))
                #expect(!served.stderr.contains(Self.appAPIToken) && !served.stdout.contains(Self.appAPIToken))
                #expect(!metrics.contains(Self.appAPIToken))
            }
        }
    }

    /// A refresh joins the app's shared budget (a lease row the app's other processes divide the
    /// budget by); serve's graceful shutdown leaves it, so they get the share back at once rather
    /// than when the lease runs out.
    @Test func serveLeavesTheSharedBudgetOnItsShutdown() async throws {
        try await TemporaryDirectory.with { directory in
            try await TestDatabase.with { db in
                let served = try await withAppAPIServe(db, in: directory, keyReadable: true) { _, apiPort in
                    let refresh =
                        "http://127.0.0.1:\(apiPort)/v1/purchases?bundleId=\(TestApp.bundleId)&environment=production&originalTransactionId=8401&refresh=always&timeout=5s"
                    let refreshed = try await HTTP.request(.GET, refresh, headers: [("Authorization", "Bearer \(Self.appAPIToken)")])
                    #expect(refreshed.status == 200, "\(String(decoding: refreshed.body, as: UTF8.self))")
                    #expect(try await db.count("SELECT count(*) FROM api_processes WHERE bundle_id = \(TestApp.bundleId)") == 1)
                }
                #expect(served.status == 0, "\(served.stderr)")
                #expect(try await db.count("SELECT count(*) FROM api_processes") == 0, "\(served.stderr)")
            }
        }
    }

    /// The OpenAPI document `serve` answers validates as OpenAPI 3.1 (openapi-spec-validator).
    @Test(
        .enabled(
            if: OpenAPIValidator.isAvailable || OpenAPIValidator.required,
            "python3 with openapi-spec-validator is not installed here (pip install openapi-spec-validator); CI installs it"))
    func theAppAPIsOpenAPIDocumentValidates() async throws {
        try await TemporaryDirectory.with { directory in
            try await TestDatabase.with { db in
                _ = try await withAppAPIServe(db, in: directory) { _, apiPort in
                    let document = try await HTTP.request(
                        .GET, "http://127.0.0.1:\(apiPort)/v1/openapi.json", headers: [("Authorization", "Bearer \(Self.appAPIToken)")])
                    #expect(document.status == 200)
                    let validator = try await runProcess("/usr/bin/env", ["python3", "-c", OpenAPIValidator.script], stdin: document.body)
                    #expect(validator.status == 0, "\(validator.stderr)")
                    #expect(validator.stdout.contains("valid"))
                }
            }
        }
    }
}
