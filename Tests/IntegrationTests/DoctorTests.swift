import AppStoreServer
import Crypto
import Foundation
import Logging
import PostgresNIO
import ReconcilerDomain
import ReconcilerStore
import TestSupport
import Testing

@testable import Reconciler

/// `reconciler doctor`'s checks of the deployment against a real PostgreSQL: all ok on a good
/// setup, and each broken thing fails with its own fix line, never showing a secret.
@Suite struct DoctorTests {
    let app: TestApp
    init() throws { app = try TestApp() }

    /// A deployment of one app whose key file and token file are written in `directory`.
    static func deployment(in directory: TemporaryDirectory, tokenFile: String? = nil) throws -> (Doctor.Deployment, key: String) {
        let pem = P256.Signing.PrivateKey().pemRepresentation
        try pem.write(toFile: directory.file("AuthKey_TEST.p8"), atomically: true, encoding: .utf8)
        try "s3cret-app-token\n".write(toFile: directory.file("app-api-token"), atomically: true, encoding: .utf8)
        let deployment = Doctor.Deployment(
            source: directory.file("reconciler.yaml"),
            targets: [AppTarget(bundleId: TestApp.bundleId, environment: .production, appAppleId: TestApp.appAppleId)],
            keyFiles: [.init(path: directory.file("AuthKey_TEST.p8"), keyId: "TESTKEY123", apps: [TestApp.bundleId], setting: "key.privateKeyPath")],
            rootCertificates: nil, rootCertificatesSetting: "rootCertificates", appApiTokenFile: tokenFile ?? directory.file("app-api-token"))
        return (deployment, pem)
    }

    static func all(_ doctor: Doctor, _ deployment: Doctor.Deployment, _ db: TestDatabase) async -> DoctorReport {
        DoctorReport(results: [Doctor.configurationLoaded(deployment)] + doctor.fileChecks(deployment) + (await doctor.databaseChecks(db.database)))
    }

    @Test func everyCheckPassesOnAGoodSetup() async throws {
        try await TemporaryDirectory.with { directory in
            let (deployment, _) = try Self.deployment(in: directory)
            try await TestDatabase.with { db in
                let report = await Self.all(Doctor(now: Date()), deployment, db)
                #expect(report.results.filter { $0.status != .ok }.map(\.line) == [])
                #expect(
                    report.results.map(\.check) == [
                        .config, .keyFile, .rootCertificates, .appApiTokenFile, .database, .migrations, .idleTransactions, .forwardQueue, .feed,
                    ])
                #expect(report.exitClass == .recovered)
                #expect(report.ending == nil)
            }
        }
    }

    /// The newest migration not applied: `migrations` fails and names it, with `reconciler migrate` as the fix; exit 1.
    @Test func anUnappliedMigrationFailsWithItsFix() async throws {
        try await TemporaryDirectory.with { directory in
            let (deployment, _) = try Self.deployment(in: directory)
            try await TestDatabase.with { db in
                let newest = try await db.strings("SELECT file_name FROM schema_migrations ORDER BY version DESC LIMIT 1")
                try await db.execute("DELETE FROM schema_migrations WHERE version = (SELECT max(version) FROM schema_migrations)")
                let report = await Self.all(Doctor(now: Date()), deployment, db)
                let migrations = try #require(report.results.first { $0.check == .migrations })
                #expect(migrations.status == .fail)
                #expect(migrations.detail.contains(try #require(newest.first)))
                #expect(migrations.fix?.contains("reconciler migrate") == true)
                #expect(migrations.line.hasPrefix("FAIL migrations: 1 migration not applied"))
                #expect(report.exitClass == .configuration)
            }
        }
    }

    @Test func aMissingTokenFileFails() throws {
        try TemporaryDirectory.with { directory in
            let (deployment, _) = try Self.deployment(in: directory, tokenFile: directory.file("missing-token"))
            let results = Doctor(now: Date()).fileChecks(deployment)
            let token = try #require(results.first { $0.check == .appApiTokenFile })
            #expect(token.status == .fail)
            #expect(token.fix?.contains("appApi.tokenFile") == true)
            #expect(DoctorReport(results: results).exitClass == .configuration)
        }
    }

    @Test func aKeyFileThatDoesNotLoadFailsNamingWhereItIsSet() throws {
        try TemporaryDirectory.with { directory in
            var (deployment, _) = try Self.deployment(in: directory)
            try "not a key".write(toFile: deployment.keyFiles[0].path, atomically: true, encoding: .utf8)
            deployment.keyFiles.append(
                .init(path: directory.file("absent.p8"), keyId: "OTHER", apps: ["a", "b"], setting: "apps[1].key.privateKeyPath"))
            let keys = Doctor(now: Date()).fileChecks(deployment).filter { $0.check == .keyFile }
            #expect(keys.map(\.status) == [.fail, .fail])
            #expect(keys.map(\.app) == [TestApp.bundleId, nil])
            #expect(keys[1].fix?.contains("apps[1].key.privateKeyPath") == true)
        }
    }

    /// The bundled root lasts until 2039: ok now, a warning with less than 90 days left, a failure once expired.
    @Test func aRootCloseToItsEndWarns() throws {
        try TemporaryDirectory.with { directory in
            let (deployment, _) = try Self.deployment(in: directory)
            let end = try #require(TrustedRoots.validity(paths: nil).first).notValidAfter
            func status(at now: Date) -> DoctorStatus? { Doctor(now: now).fileChecks(deployment).first { $0.check == .rootCertificates }?.status }
            #expect(status(at: end.addingTimeInterval(-91 * 86_400)) == .ok)
            #expect(status(at: end.addingTimeInterval(-89 * 86_400)) == .warn)
            #expect(status(at: end.addingTimeInterval(60)) == .fail)
        }
    }

    /// A session of the reconciler's role left idle in a transaction fails the check (the limit
    /// moved to zero instead of waiting five minutes).
    @Test func aTransactionLeftIdleFails() async throws {
        try await TestDatabase.with { db in
            var doctor = Doctor(now: Date())
            doctor.idleTransactionLimit = .zero
            #expect(try await doctor.idleTransactions(db.database).status == .ok)
            let result = try await db.client.withConnection { connection in
                try await connection.query("BEGIN", logger: TestDatabase.logger)
                try await connection.query("SELECT 1", logger: TestDatabase.logger)
                let result = try await doctor.idleTransactions(db.database)
                try await connection.query("ROLLBACK", logger: TestDatabase.logger)
                return result
            }
            #expect(result.status == .fail)
            #expect(result.detail.hasPrefix("1 session of this role idle in a transaction"))
            #expect(result.fix?.contains("pg_terminate_backend") == true)
        }
    }

    /// A delivery waiting more than an hour to be forwarded fails; a younger one is fine.
    @Test func aDeliveryWaitingMoreThanAnHourFails() async throws {
        try await TestDatabase.with { db in
            _ = try await app.recordForwarded(1, to: "https://app.example/hook", in: db, purchasePrefix: "doctor")
            let doctor = Doctor(now: Date())
            #expect(try await doctor.forwardQueue(db.database).status == .ok)
            try await db.execute("UPDATE forward_queue SET queued_at = now() - interval '2 hours'")
            let result = try await doctor.forwardQueue(db.database)
            #expect(result.status == .fail)
            #expect(result.fix?.contains("reconciler forward") == true)
        }
    }

    /// A database that does not answer within the timeout fails transiently (exit 2 alone), and
    /// no line or JSON item holds its password, the key or the token.
    @Test func noSecretInAnyLine() async throws {
        try await TemporaryDirectory.with { directory in
            let (deployment, pem) = try Self.deployment(in: directory)
            let settings = try DatabaseSettings(url: "postgres://reconciler:pa55word-secret@127.0.0.1:1/reconciler", maximumConnections: 2)
            let unreachable: DoctorResult
            do {
                try await settings.checkConnection(within: .seconds(1), logger: TestDatabase.logger)
                Issue.record("port 1 answered")
                return
            } catch {
                unreachable = Doctor.databaseUnreachable(error)
            }
            #expect(unreachable.status == .fail)
            #expect(unreachable.transient)
            let report = DoctorReport(results: [Doctor.configurationLoaded(deployment)] + Doctor(now: Date()).fileChecks(deployment) + [unreachable])
            #expect(report.exitClass == .retryable)
            let encoder = JSONEncoder()
            let text = report.lines.joined(separator: "\n") + String(decoding: try encoder.encode(report), as: UTF8.self)
            let keyBody = pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }
            for secret in ["pa55word-secret", "s3cret-app-token"] + keyBody.map(String.init) {
                #expect(!text.contains(secret))
            }
        }
    }
}
