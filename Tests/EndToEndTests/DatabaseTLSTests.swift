import Foundation
import Reconciler
import ReconcilerDomain
import TestSupport
import Testing

/// `sslmode` and `sslrootcert` through the real `reconciler`, against a PostgreSQL of the test's own that
/// serves a certificate from a self-made CA and accepts TCP connections only over TLS.
@Suite struct DatabaseTLSTests {
    @Test func verifyFullWithSslrootcert() async throws {
        let authority = try TestCertificateAuthority(name: "Reconciler test DB CA")
        let stranger = try TestCertificateAuthority(name: "Some other CA")
        let server = try authority.serverCertificate(dnsNames: ["localhost"], ipAddresses: [[127, 0, 0, 1]])
        let client = try authority.clientCertificate(user: "postgres")
        let temporary = try TemporaryDirectory.create("tls")
        defer { temporary.remove() }
        let directory = temporary.path
        let ca = "\(directory)/ca.pem", otherCA = "\(directory)/other-ca.pem"
        let clientCertificate = "\(directory)/client.crt", clientKey = "\(directory)/client.key"
        try authority.certificatePEM.write(toFile: ca, atomically: true, encoding: .utf8)
        try stranger.certificatePEM.write(toFile: otherCA, atomically: true, encoding: .utf8)
        try client.certificatePEM.write(toFile: clientCertificate, atomically: true, encoding: .utf8)
        try client.privateKeyPEM.write(toFile: clientKey, atomically: true, encoding: .utf8)

        let tls = PrivateCluster.Configuration.TLS(certificateChainPEM: server.certificatePEM, privateKeyPEM: server.privateKeyPEM)
        try await PrivateCluster.with(.init(tls: tls, listenAddresses: ["127.0.0.1", "127.0.0.2"])) { cluster in
            func status(_ url: String) async throws -> ProcessResult {
                try await runProcess("reconciler", ["migrate", "--status"], environment: ["DATABASE_URL": url, "LOG_LEVEL": "warning"])
            }
            func expectWorks(_ url: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
                let result = try await status(url)
                #expect(result.status == 0, "\(url): \(result.stderr.suffix(1500))", sourceLocation: sourceLocation)
            }
            func expectRefused(_ url: String, saying words: [String], sourceLocation: SourceLocation = #_sourceLocation) async throws {
                let result = try await status(url)
                #expect(result.status == 1, "\(url): \(result.stderr.suffix(1500))", sourceLocation: sourceLocation)
                for word in words {
                    #expect(result.stderr.contains(word), "\(url): no \"\(word)\" in \(result.stderr.suffix(1500))", sourceLocation: sourceLocation)
                }
            }
            let port = cluster.port

            // The CA that signed the server's certificate: verify-full to its IP and to its DNS name.
            try await expectWorks("postgres://postgres@127.0.0.1:\(port)/postgres?sslmode=verify-full&sslrootcert=\(ca)")
            try await expectWorks("postgres://postgres@localhost:\(port)/postgres?sslmode=verify-full&sslrootcert=\(ca)")
            let migrate = try await runProcess(
                "reconciler", ["migrate"],
                environment: [
                    "DATABASE_URL": "postgres://postgres@127.0.0.1:\(port)/postgres?sslmode=verify-full&sslrootcert=\(ca)"
                ])
            #expect(migrate.status == 0, "\(migrate.stderr)")

            // Another CA: not trusted, whatever the mode that checks certificates.
            try await expectRefused(
                "postgres://postgres@127.0.0.1:\(port)/postgres?sslmode=verify-full&sslrootcert=\(otherCA)",
                saying: ["certificate", "sslrootcert"])
            try await expectRefused(
                "postgres://postgres@127.0.0.1:\(port)/postgres?sslmode=verify-ca&sslrootcert=\(otherCA)",
                saying: ["certificate"])
            // As in libpq, `require` with a root certificate checks the chain like verify-ca; without, nothing.
            try await expectRefused(
                "postgres://postgres@127.0.0.1:\(port)/postgres?sslmode=require&sslrootcert=\(otherCA)",
                saying: ["certificate"])
            try await expectWorks("postgres://postgres@127.0.0.1:\(port)/postgres?sslmode=require")
            // The system trust store does not hold the self-made CA.
            try await expectRefused("postgres://postgres@127.0.0.1:\(port)/postgres?sslmode=verify-full", saying: ["system trust store"])
            try await expectRefused("postgres://postgres@127.0.0.1:\(port)/postgres?sslrootcert=system", saying: ["certificate"])

            // A host name the certificate does not carry, at an address it does not carry either (hostaddr
            // connects to 127.0.0.2 and keeps the name for verification; an IP in the certificate matching the
            // address connected to would also satisfy verify-full): verify-full refuses, verify-ca accepts.
            try await expectRefused(
                "postgres://postgres@db.example.invalid:\(port)/postgres?hostaddr=127.0.0.2&sslmode=verify-full&sslrootcert=\(ca)",
                saying: ["db.example.invalid"])
            try await expectWorks("postgres://postgres@db.example.invalid:\(port)/postgres?hostaddr=127.0.0.2&sslmode=verify-ca&sslrootcert=\(ca)")
            try await expectRefused("postgres://postgres@127.0.0.2:\(port)/postgres?sslmode=verify-full&sslrootcert=\(ca)", saying: ["127.0.0.2"])
            try await expectWorks("postgres://postgres@127.0.0.2:\(port)/postgres?sslmode=verify-ca&sslrootcert=\(ca)")

            // The server accepts TCP only over TLS.
            try await expectRefused("postgres://postgres@127.0.0.1:\(port)/postgres?sslmode=disable", saying: ["pg_hba.conf"])

            // A missing root certificate file is a configuration error that names the parameter.
            try await expectRefused(
                "postgres://postgres:\(DatabaseSecretsTests.secret(""))@127.0.0.1:\(port)/postgres?sslmode=verify-full&sslrootcert=\(directory)/missing.pem",
                saying: ["sslrootcert", "\(directory)/missing.pem"])
        }

        // A server that logs `postgres` in only with a client certificate from the CA: sslcert and sslkey.
        let mutual = PrivateCluster.Configuration.TLS(
            certificateChainPEM: server.certificatePEM, privateKeyPEM: server.privateKeyPEM,
            clientCertificateAuthorityPEM: try authority.certificatePEM)
        try await PrivateCluster.with(.init(tls: mutual)) { cluster in
            let url = "postgres://postgres@127.0.0.1:\(cluster.port)/postgres?sslmode=verify-full&sslrootcert=\(ca)"
            let withCertificate = try await runProcess(
                "reconciler", ["migrate", "--status"],
                environment: [
                    "DATABASE_URL": url + "&sslcert=\(clientCertificate)&sslkey=\(clientKey)", "LOG_LEVEL": "warning",
                ])
            #expect(withCertificate.status == 0, "\(withCertificate.stderr.suffix(1500))")
            let without = try await runProcess("reconciler", ["migrate", "--status"], environment: ["DATABASE_URL": url, "LOG_LEVEL": "warning"])
            #expect(without.status == 1, "\(without.stderr.suffix(1500))")
        }
    }

    /// PrivateCluster's restart and stop, which tests of a database restart mid-run rely on; the
    /// port stays its own while it is down.
    @Test func privateClusterRestartsAndStops() async throws {
        try await PrivateCluster.with { cluster in
            #expect(try await cluster.psql("SELECT 40 + 2").trimmingCharacters(in: .whitespacesAndNewlines) == "42")
            let before = try await cluster.psql("SELECT pg_postmaster_start_time()")
            try await cluster.restart()
            let after = try await cluster.psql("SELECT pg_postmaster_start_time()")
            #expect(before != after)
            let result = try await runProcess("reconciler", ["migrate"], environment: ["DATABASE_URL": cluster.url, "LOG_LEVEL": "warning"])
            #expect(result.status == 0, "\(result.stderr)")
            try await cluster.stop()
            await #expect(throws: PrivateCluster.Failure.self) { try await cluster.psql("SELECT 1") }
            // Down, it still holds its port: no other test (of this process or another) takes it before the start.
            #expect(!isFreePort(cluster.port))
            try await cluster.start()
            #expect(try await cluster.psql("SELECT count(*) FROM schema_migrations").trimmingCharacters(in: .whitespacesAndNewlines) != "0")
        }
    }
}
